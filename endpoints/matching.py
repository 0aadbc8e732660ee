"""Event-type names and the subscriptions that match them (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Also the API schemas' `pattern` (pydantic's Rust engine, where $ is the end of
# the text). Here they are matched with fullmatch: re.match with $ would let a
# trailing line break through ("order.paid\n").
EVENT_TYPE_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
SUBSCRIPTION_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?$")
MAX_EVENT_TYPE_LENGTH = 255


def is_valid_event_type(value: str) -> bool:
    return len(value) <= MAX_EVENT_TYPE_LENGTH and bool(EVENT_TYPE_RE.fullmatch(value))


def is_valid_subscription(value: str) -> bool:
    return len(value) <= MAX_EVENT_TYPE_LENGTH and bool(
        SUBSCRIPTION_RE.fullmatch(value)
    )


def subscribes_to(event_types: Iterable[str], event_type: str) -> bool:
    """[] matches everything; "a.b" matches exactly; "a.*" matches "a.b", "a.b.c"."""
    patterns = list(event_types)
    if not patterns:
        return True
    for pattern in patterns:
        if pattern == event_type:
            return True
        if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
            return True
    return False
