"""What an event must satisfy before it is written, wherever it comes from.

`event_check` is the one validator: every publish path (the API, a batch,
in-process `event_publish`, the portal's test event and example, the
operational events) reaches it through `services.drafts_prepare`, for every
event of a publish (a batch in one pass) before anything is written, and the
whole publish is refused if any event has problems. In order: the type's
name, the data's shape (a JSON object no deeper than MAX_EVENT_DEPTH, with
no string that cannot be stored), its size as stored (MAX_EVENT_BYTES), then
the type's schema (`event_errors`). The cheap walks come first, so neither
the JSON encoder nor the schema validator ever sees data too deep for them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.conf import settings

from endpoints.catalogue import schema_problems
from endpoints.matching import MAX_EVENT_TYPE_LENGTH, is_valid_event_type
from endpoints.models import Merchant
from relayproject.lib.jsonlimits import json_problems

# (where in the event, what is wrong): where is e.g. ["data"] or ["type"].
Problem = tuple[list, str]
MAX_ORDERING_KEY_LENGTH = 255  # Event.ordering_key's column


class EventsRefused(Exception):
    """Some events may not be published; nothing was written.

    errors: (index of the event in the publish, where in it, what is wrong).
    """

    def __init__(self, errors: Sequence[tuple[int, list, str]]) -> None:
        super().__init__(f"{len(errors)} problem(s), first: {errors[0]}")
        self.errors = list(errors)


def event_check(
    *, merchant: Merchant, type: str, data: object, ordering_key: str = ""
) -> tuple[list[Problem], str]:
    """(problems, data as the JSON text to store); the text is "" when refused."""
    if problem := ordering_key_problem(ordering_key):
        return [(["ordering_key"], problem)], ""
    if not isinstance(type, str) or not is_valid_event_type(type):
        return [
            (
                ["type"],
                "An event type is dot-separated words of letters, digits, _ and "
                f"-, at most {MAX_EVENT_TYPE_LENGTH} characters.",
            )
        ], ""
    if not isinstance(data, dict):
        return [(["data"], "Event data is a JSON object ({...}).")], ""
    problems = json_problems(data, max_depth=settings.MAX_EVENT_DEPTH)
    if problems:
        return [(["data", *where], message) for where, message in problems], ""
    try:
        data_json = json.dumps(data, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return [(["data"], "NaN and Infinity are not JSON numbers.")], ""
    problems = event_errors(
        merchant=merchant, type=type, data=data, data_json=data_json
    )
    return problems, "" if problems else data_json


def ordering_key_problem(key: object) -> str:
    """What is wrong with an ordering key ("" when nothing): the lanes'
    (deliveries/lanes.py) name, stored and compared as text."""
    if not isinstance(key, str):
        return "An ordering key is a string."
    if len(key) > MAX_ORDERING_KEY_LENGTH:
        return f"An ordering key is at most {MAX_ORDERING_KEY_LENGTH} characters."
    if "\x00" in key or any(0xD800 <= ord(c) <= 0xDFFF for c in key):
        return "An ordering key cannot contain NUL or a lone surrogate."
    return ""


def event_errors(
    *, merchant: Merchant, type: str, data: object, data_json: str
) -> list[Problem]:
    """Size and schema, for data event_check has found storable."""
    limit = settings.MAX_EVENT_BYTES
    if len(data_json) > limit:  # ASCII (json.dumps escapes the rest): bytes
        return [
            (
                ["data"],
                f"{len(data_json)} bytes as JSON, over MAX_EVENT_BYTES ({limit}).",
            )
        ]
    # The event-type catalogue: data of a type with a schema must match it.
    return [
        (["data", *path], message)
        for path, message in schema_problems(type=type, data=data)
    ]
