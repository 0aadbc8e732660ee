"""Who receives an event: the one place fan-out rules live (pure).

Publishing reads a merchant's active endpoints once (whole rows), then asks
`receivers` for each event, so the API, batches and in-process publishing
apply the same rules. Subscriptions to event types are the rule today; a rule
on the payload (a filter per endpoint) belongs here, beside them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from endpoints.filtering import endpoints_passing
from endpoints.matching import subscribes_to
from endpoints.models import Endpoint


def subscribed(
    *,
    type: str,
    endpoints: Sequence[Endpoint],
    aimed_at: Collection[str] | None = None,
) -> list[Endpoint]:
    """The endpoints among `endpoints` (active ones) an event of this type is for,
    before payload filters: what MAX_DELIVERIES_PER_REQUEST counts.

    `aimed_at` names endpoints that get it whatever they subscribe to (a
    portal test event goes to one endpoint); the rest get nothing then.
    """
    if aimed_at is not None:
        return [e for e in endpoints if e.pk in aimed_at]
    return [e for e in endpoints if subscribes_to(e.event_types, type)]


def receivers(
    *,
    type: str,
    data: object,
    endpoints: Sequence[Endpoint],
    aimed_at: Collection[str] | None = None,
    chosen: list[Endpoint] | None = None,
) -> list[Endpoint]:
    """The endpoints among `endpoints` (active ones) that get a delivery.

    chosen: what `subscribed` answered for this type and endpoints, if the
    caller asked it already (a batch asks once per type)."""
    if chosen is None:
        chosen = subscribed(type=type, endpoints=endpoints, aimed_at=aimed_at)
    if aimed_at is not None:
        return chosen
    # Payload filters: a filtered-out endpoint gets no delivery row at all.
    return endpoints_passing(chosen, type=type, data=data)
