"""Public identifiers: a type prefix and a time-ordered random part.

The first 10 characters encode milliseconds since the epoch, so ids sort by
creation time; that makes them good primary keys and stable cursors, and on
PostgreSQL the history tables are range-partitioned by day on them
(deliveries/partitions.py; the encoding's order is the byte order).
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def _millis(at: datetime | None) -> int:
    if at is None:
        return time.time_ns() // 1_000_000
    return int(at.timestamp() * 1000)


def new_id(prefix: str, *, at: datetime | None = None) -> str:
    """A new id made now (or, for rows with a past, at `at`)."""
    return f"{prefix}_{_encode(_millis(at), 10)}{_encode(secrets.randbits(80), 16)}"


def id_floor(prefix: str, at: datetime) -> str:
    """The lowest id made at or after `at`: every such id sorts >= it."""
    return f"{prefix}_{_encode(_millis(at), 10)}"


def new_event_id() -> str:
    return new_id("evt")


def new_delivery_id() -> str:
    return new_id("dlv")


def new_endpoint_id() -> str:
    return new_id("ep")
