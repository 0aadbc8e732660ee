"""Standard Webhooks signing: the signature header (``v1`` HMAC, ``v1a``
Ed25519) and the signed body.

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

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from endpoints.secrets import SECRET_PREFIX
from endpoints.signing_keys import PRIVATE_KEY_PREFIX, V1, V1A, signs_v1a

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


@lru_cache(maxsize=1024)
def _ed25519_key(private_key: str) -> Ed25519PrivateKey:
    # Parsed once per key and process: every send of a v1a endpoint signs with
    # it, and the parse costs more than the signature. validate=True for the
    # reason _key has.
    seed = base64.b64decode(private_key.removeprefix(PRIVATE_KEY_PREFIX), validate=True)
    return Ed25519PrivateKey.from_private_bytes(seed)


def sign_v1a(*, private_key: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return ``v1a,<base64 Ed25519 signature of "{msg_id}.{timestamp}." + body>``.

    Raises ``ValueError`` if the private key is not a base64 32-byte seed.
    """
    to_sign = f"{msg_id}.{timestamp}.".encode() + body
    signature = _ed25519_key(private_key).sign(to_sign)
    return f"{V1A},{base64.b64encode(signature).decode('ascii')}"


def signature_header(
    *,
    secrets: Sequence[str],
    msg_id: str,
    timestamp: int,
    body: bytes,
    scheme: str = V1,
    private_key: str = "",
) -> str:
    """Return the ``webhook-signature`` value, space-separated signatures: for
    `scheme` v1 or both, one ``v1,...`` per secret, in the order given (newest
    first), so receivers holding either the current or the previous secret
    verify during a rotation overlap; for v1a or both, then one ``v1a,...``
    made with `private_key`.
    """
    v1a = signs_v1a(scheme)
    if scheme == V1A:
        secrets = ()
    elif not secrets:
        # An empty header would be sent as "unsigned", which receivers reject
        # with a confusing error; fail where the bug is.
        raise ValueError("at least one secret is required")
    if v1a and not private_key:
        raise ValueError(f"signing with {scheme} needs the endpoint's private key")
    signatures = [
        sign(secret=s, msg_id=msg_id, timestamp=timestamp, body=body) for s in secrets
    ]
    if v1a:
        signatures.append(
            sign_v1a(
                private_key=private_key, msg_id=msg_id, timestamp=timestamp, body=body
            )
        )
    return " ".join(signatures)


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
