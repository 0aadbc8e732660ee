"""Public identifiers: a type prefix and a time-ordered random part.

The first 10 characters encode milliseconds since the epoch, so ids sort by
creation time; that makes them good primary keys and stable cursors, and on
PostgreSQL the history tables are range-partitioned by day on them
(deliveries/history/partitions.py; the encoding's order is the byte order).
"""

from __future__ import annotations

import os
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


# A random byte's last five bits as a digit: 256 is a multiple of 32, so
# every digit is as likely as the others. The random part's 80 bits are
# exactly its 16 digits (5 bits each), so they can be drawn digit by digit,
# by one translate of random bytes, instead of encoding an 80-bit number.
_DIGIT_OF_BYTE = bytes(_ALPHABET[b & 31].encode()[0] for b in range(256))


def new_id(prefix: str, *, at: datetime | None = None) -> str:
    """A new id made now (or, for rows with a past, at `at`)."""
    return new_ids(prefix, 1, at=at)[0]


def new_ids(prefix: str, count: int, *, at: datetime | None = None) -> list[str]:
    """`count` new ids made now (or at `at`): one clock reading and one read of
    the system's randomness for all of them, as a batch of 500 events makes
    1,500 ids. The same digits as `_encode(millis << 80 | random 80 bits, 26)`."""
    head = f"{prefix}_{_encode(_millis(at), 10)}"
    noise = os.urandom(16 * count).translate(_DIGIT_OF_BYTE).decode()
    return [head + noise[i : i + 16] for i in range(0, 16 * count, 16)]


def id_floor(prefix: str, at: datetime) -> str:
    """The lowest id made at or after `at`: every such id sorts >= it."""
    return f"{prefix}_{_encode(_millis(at), 10)}"


def new_event_id() -> str:
    return new_id("evt")


def new_delivery_id() -> str:
    return new_id("dlv")


def new_endpoint_id() -> str:
    return new_id("ep")
