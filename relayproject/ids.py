"""Public identifiers: a type prefix and a time-ordered random part.

The first 10 characters encode milliseconds since the epoch, so ids sort by
creation time; that makes them good primary keys and stable cursors.
"""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    millis = time.time_ns() // 1_000_000
    return f"{prefix}_{_encode(millis, 10)}{_encode(secrets.randbits(80), 16)}"


def new_event_id() -> str:
    return new_id("evt")


def new_delivery_id() -> str:
    return new_id("dlv")


def new_endpoint_id() -> str:
    return new_id("ep")
