"""run_dispatcher refuses the worker id every pull lease is held under."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from deliveries.pull.leasing import PULLED_BY


def test_the_pull_leases_worker_id_is_refused():
    with pytest.raises(CommandError, match="reserved for pull leases"):
        call_command("run_dispatcher", "--once", "--worker-id", PULLED_BY)
