"""What an event must satisfy before it is written, wherever it comes from.

`event_errors` is the one hook: publishing calls it for every event of a
publish (a batch in one pass) before anything is written, and refuses the
whole publish if any event has errors. A check on the payload (its size, its
depth, a schema for its type) belongs here.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from endpoints.catalogue import schema_problems
from endpoints.models import Merchant

# (where in the event, what is wrong): where is e.g. ["data"] or ["type"].
Problem = tuple[list, str]


class EventsRefused(Exception):
    """Some events may not be published; nothing was written.

    errors: (index of the event in the publish, where in it, what is wrong).
    """

    def __init__(self, errors: Sequence[tuple[int, list, str]]) -> None:
        super().__init__(f"{len(errors)} problem(s), first: {errors[0]}")
        self.errors = list(errors)


def event_errors(
    *, merchant: Merchant, type: str, data: object, data_json: str
) -> list[Problem]:
    """What is wrong with one event; data_json is data as it will be stored."""
    if len(data_json) > settings.MAX_EVENT_BYTES:
        return [(["data"], "Larger than MAX_EVENT_BYTES.")]
    # The event-type catalogue: data of a type with a schema must match it.
    return [
        (["data", *path], message)
        for path, message in schema_problems(type=type, data=data)
    ]
