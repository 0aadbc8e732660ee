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


def receivers(
    *,
    type: str,
    data: object,
    endpoints: Sequence[Endpoint],
    aimed_at: Collection[str] | None = None,
) -> list[Endpoint]:
    """The endpoints among `endpoints` (active ones) that get a delivery.

    `aimed_at` names endpoints that get it whatever they subscribe to (a
    portal test event goes to one endpoint); the rest get nothing then.
    """
    if aimed_at is not None:
        return [e for e in endpoints if e.pk in aimed_at]
    subscribed = [e for e in endpoints if subscribes_to(e.event_types, type)]
    # Payload filters: a filtered-out endpoint gets no delivery row at all.
    return endpoints_passing(subscribed, type=type, data=data)
