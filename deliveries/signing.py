"""Standard Webhooks signing: the signature header and the signed body.

Pure: no Django, no I/O. The body bytes returned by ``serialize_body`` are the
exact bytes that must be both signed and sent (contract section 4).
"""

from __future__ import annotations

import base64
import hmac
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache

from endpoints.secrets import SECRET_PREFIX

SIGNATURE_VERSION = "v1"


@lru_cache(maxsize=1024)
def _keyed_sha256(key: bytes) -> hmac.HMAC:
    """An HMAC-SHA256 with `key` absorbed and no message yet; never updated
    itself, only copied (hmac_sha256). Cached as _key is: a dispatcher signs
    with its endpoints' live secrets and fingerprints with one key."""
    return hmac.new(key, digestmod="sha256")


def hmac_sha256(key: bytes, msg: bytes) -> bytes:
    """HMAC-SHA256 of msg, computed while holding the GIL.

    Not ``hmac.digest``: that one-shot releases the GIL around every call,
    however short the message, and a send loop that lets go of the GIL waits
    for it again behind the dispatcher's other threads for up to the switch
    interval (5 ms) per signature (issue 21: 4 ms a call beside a busy thread
    against 3 us). A copy of the keyed state, updated and finished, keeps it
    for messages under hashlib's 2 KiB threshold and skips the key schedule.
    """
    mac = _keyed_sha256(key).copy()
    mac.update(msg)
    return mac.digest()


@lru_cache(maxsize=1024)
def _key(secret: str) -> bytes:
    # Cached: every send signs with its endpoint's one or two live secrets.
    # validate=True so a mangled secret fails loudly instead of silently
    # signing with a different key that no receiver can verify.
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)


def sign(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return ``v1,<base64 HMAC-SHA256(key, "{msg_id}.{timestamp}." + body)>``.

    Raises ``ValueError`` if the secret is not valid base64.
    """
    to_sign = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac_sha256(_key(secret), to_sign)
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signature_header(
    *, secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> str:
    """Return the ``webhook-signature`` value: one space-separated ``v1,...`` per
    secret, in the order given (newest first), so receivers holding either the
    current or the previous secret verify during a rotation overlap.
    """
    if not secrets:
        # An empty header would be sent as "unsigned", which receivers reject
        # with a confusing error; fail where the bug is.
        raise ValueError("at least one secret is required")
    return " ".join(
        sign(secret=s, msg_id=msg_id, timestamp=timestamp, body=body) for s in secrets
    )


def format_timestamp(value: datetime) -> str:
    """Return ``value`` in UTC as ``YYYY-MM-DDTHH:MM:SS.fffZ``, as the API writes it.

    Raises ``ValueError`` for a naive datetime.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        # Guessing the zone of a naive value would put a wrong instant into a
        # signed body that receivers cannot question.
        raise ValueError("created_at must be timezone-aware")
    # Fixed-width milliseconds (isoformat() alone drops a zero fraction, which
    # would give receivers two shapes), the same string GET /events shows.
    utc = value.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="milliseconds") + "Z"


def serialize_body(
    *, event_id: str, event_type: str, created_at: datetime, data: object
) -> bytes:
    """Return the compact UTF-8 JSON body ``{"id","type","timestamp","data"}``.

    Raises ``TypeError``/``ValueError`` if ``data`` is not plain JSON (NaN and
    Infinity included, which are not JSON and break strict receivers).
    """
    payload = {
        "id": event_id,
        "type": event_type,
        "timestamp": format_timestamp(created_at),
        "data": data,
    }
    return json.dumps(
        payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
