"""How the portal shows pull endpoints and listen sessions: the three API
calls that pull, ack and nack an endpoint's messages, and the client
library's `listen` command, each with this relay's own addresses.

Pure but for reverse() and settings: the commands name the URL the relay is
reached at (RELAY_BASE_URL, the origin every link the relay sends uses) and
the path it is mounted under, so what a merchant copies works as it is.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from deliveries.pull.leasing import MAX_LIMIT, visibility_seconds
from endpoints import brokers
from endpoints.models import Endpoint

KEY_VARIABLE = "WEBHOOK_RELAY_API_KEY"  # where the client and the snippets read the key
FORWARD_TO = "http://localhost:3000/webhooks"  # a developer's handler, as an example
PULL_LIMIT = 10  # the example pull's limit (the API allows up to MAX_LIMIT)


def relay_url() -> str:
    """The relay's URL as the client library takes it (its --url): the
    origin and the prefix the relay's routes are mounted under."""
    mounted = reverse("portal:home").removesuffix("portal/").rstrip("/")
    return settings.RELAY_BASE_URL + mounted


def listen_command(
    *,
    merchant_slug: str,
    session_id: str | None = None,
    event_types: Sequence[str] = (),
) -> str:
    """`webhook-relay-client listen ...`: attached to a session started in
    the portal, or starting its own with these event types."""
    words = ["webhook-relay-client", "listen"]
    if session_id:
        words += ["--session", session_id]
    words += ["--merchant", merchant_slug, "--url", relay_url()]
    for event_type in event_types:
        words += ["--events", event_type]
    words += ["--forward-to", FORWARD_TO]
    return " ".join(shlex.quote(word) for word in words)


@dataclass(frozen=True)
class PullCalls:
    """The calls a consumer makes, as curl commands, and the figures they name."""

    pull: str
    ack: str
    nack: str
    visibility_seconds: int
    limit: int = PULL_LIMIT
    max_limit: int = MAX_LIMIT


def pull_calls(endpoint: Endpoint) -> PullCalls:
    path = reverse("api:endpoint_get", args=[endpoint.merchant.slug, endpoint.pk])
    messages = f"{settings.RELAY_BASE_URL}{path}/messages"
    auth = f'-H "Authorization: Bearer ${KEY_VARIABLE}"'
    json = "-H 'Content-Type: application/json'"
    return PullCalls(
        pull=f"curl {auth} \\\n  '{messages}?limit={PULL_LIMIT}'",
        ack=(
            f"curl -X POST {auth} {json} \\\n"
            f"""  -d '{{"ids": ["dlv_…"]}}' \\\n  '{messages}/ack'"""
        ),
        nack=(
            f"curl -X POST {auth} {json} \\\n"
            f"""  -d '{{"ids": ["dlv_…"], "retry_after_seconds": 60}}' \\\n"""
            f"  '{messages}/nack'"
        ),
        visibility_seconds=visibility_seconds(endpoint),
    )


def pull_context(endpoint: Endpoint) -> dict:
    """A pull endpoint's calls and the listen command that fits it: attached
    to it when it is a listen session, else starting one of its own."""
    if endpoint.kind != brokers.PULL:
        return {}
    slug = endpoint.merchant.slug
    if endpoint.listen_session:
        command = listen_command(merchant_slug=slug, session_id=endpoint.pk)
    else:
        command = listen_command(merchant_slug=slug, event_types=endpoint.event_types)
    return {"pull": pull_calls(endpoint), "listen_command": command}
