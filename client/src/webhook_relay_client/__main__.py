"""`python -m webhook_relay_client listen ...`: the same as `webhook-relay-client`."""

from __future__ import annotations

from webhook_relay_client.cli import main

raise SystemExit(main())
