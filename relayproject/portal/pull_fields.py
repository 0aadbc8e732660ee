"""The endpoint form's pull kind (endpoints/brokers.py PULL): no destination,
one field of its own, the visibility timeout, and none of the fields that
shape a send, since nothing is sent to it."""

from __future__ import annotations

from collections.abc import Mapping

from django import forms
from django.conf import settings

from endpoints import brokers
from endpoints.endpoint_fields import VISIBILITY_TIMEOUT_LIMIT

# What shapes a send. A pull endpoint is sent nothing (its consumer fetches
# its messages), so none of them is on its form, and none is read for it.
SEND_FIELDS = (
    "rate_limit_per_second",
    "remove_headers",
    "headers",
    "max_in_flight",
    "timeout_seconds",
)


def sends(kind: str) -> bool:
    """Whether the relay sends to an endpoint of this kind (SEND_FIELDS apply)."""
    return kind != brokers.PULL


def visibility_field() -> forms.IntegerField:
    default = settings.PULL_VISIBILITY_TIMEOUT_SECONDS
    return forms.IntegerField(
        label="Visibility timeout (seconds)",
        required=False,
        min_value=1,
        max_value=VISIBILITY_TIMEOUT_LIMIT,
        widget=forms.NumberInput(attrs={"min": 1, "max": VISIBILITY_TIMEOUT_LIMIT}),
        help_text=(
            "How long a message your consumer pulled stays leased to it. Not "
            "acked or nacked by then, it is handed out again and the lost "
            f"lease counts as an attempt. From 1 to {VISIBILITY_TIMEOUT_LIMIT}. "
            f"Empty: the relay's default, {default}."
        ),
        error_messages={
            "invalid": "Whole seconds, as 30.",
            "min_value": f"Whole seconds from 1 to {VISIBILITY_TIMEOUT_LIMIT}.",
            "max_value": f"Whole seconds from 1 to {VISIBILITY_TIMEOUT_LIMIT}.",
        },
    )


def pull_kwargs(data: Mapping[str, object]) -> dict[str, object]:
    """The service's kind, url and visibility timeout for a pull endpoint
    (None: the relay's default)."""
    return {
        "kind": brokers.PULL,
        "url": "",
        "visibility_timeout_seconds": data.get("visibility_timeout_seconds"),
    }


# Said above a pull endpoint's one field, in place of a destination.
PULL_NOTE = (
    "Nothing is sent: your consumer fetches this endpoint's messages over the "
    "REST API with a merchant API key (GET .../messages, then ack or nack "
    "each), so it needs no public URL. Its page shows the calls once it exists."
)

# The order option as a pull endpoint keeps it: its consumer is handed the
# next of a key only once the one before is acked or dead.
PULL_ORDER_HELP = (
    "Events that share an ordering_key are handed to your consumer in publish "
    "order, each once the previous one was acked or went dead (a dead one does "
    "not block the rest). Applies to events published from now on."
)
