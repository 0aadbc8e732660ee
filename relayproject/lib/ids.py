"""Public identifiers: a type prefix and a time-ordered random part.

The first 10 characters encode milliseconds since the epoch, so ids sort by
creation time; that makes them good primary keys and stable cursors, and on
PostgreSQL the history tables are range-partitioned by day on them
(deliveries/history/partitions.py; the encoding's order is the byte order).
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


# Every pair of digits (10 bits): an id is 13 lookups, not 26 divmods, which
# counts when a batch of 500 events makes 1,500 ids.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def _encode(value: int, length: int) -> str:
    """value as `length` (even) base32 digits, most significant first."""
    pairs = _PAIRS
    return "".join([pairs[value >> s & 1023] for s in range(5 * length - 10, -1, -10)])


def _millis(at: datetime | None) -> int:
    if at is None:
        return time.time_ns() // 1_000_000
    return int(at.timestamp() * 1000)


def new_id(prefix: str, *, at: datetime | None = None) -> str:
    """A new id made now (or, for rows with a past, at `at`)."""
    return f"{prefix}_{_encode(_millis(at) << 80 | secrets.randbits(80), 26)}"


def id_floor(prefix: str, at: datetime) -> str:
    """The lowest id made at or after `at`: every such id sorts >= it."""
    return f"{prefix}_{_encode(_millis(at), 10)}"


def new_event_id() -> str:
    return new_id("evt")


def new_delivery_id() -> str:
    return new_id("dlv")


def new_endpoint_id() -> str:
    return new_id("ep")
