"""Check, in a receiver, that a webhook came from the relay (contract section 4).

Standard Webhooks `v1`: `webhook-signature` holds one or more space-separated
`v1,<base64 HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}")>`
(two during a secret rotation); any one matching is enough. It fails closed:
anything missing, malformed, too old, too new, unknown or unmatched raises
InvalidSignature, and nothing is returned until the signature matched.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import time
from collections.abc import Iterable
from typing import Any

from webhook_relay_client.version import __version__

SECRET_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"
DEFAULT_TOLERANCE = 300  # seconds either side of the receiver's clock
SIGNED_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
DIGEST_BYTES = hashlib.sha256().digest_size
# Asymmetric (Ed25519) signatures: named by the contract, not signed by the
# relay yet, and not verified here. Refused with this rather than skipped.
V1A_UNSUPPORTED = (
    f"webhook-relay-client {__version__} verifies v1 (HMAC) signatures only; "
    "v1a (Ed25519, whpk_ public keys) is not supported"
)


class InvalidSignature(Exception):
    """Not a webhook signed with this secret within the tolerance: reject it."""


def verify(
    secret: str,
    headers: Any,
    body: bytes,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Any:
    """Return the parsed JSON payload of a webhook whose signature matches.

    `secret` is the endpoint's `whsec_...` secret; `headers` the request's
    headers (any mapping, or pairs; names in any case); `body` the raw body
    bytes exactly as received, before any JSON parsing. `now` (Unix seconds)
    is for tests. Raises InvalidSignature for a request to refuse, ValueError
    for a secret that is not a whsec_ secret, TypeError for a body that is
    not bytes."""
    key = _key(secret)
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(
            "body must be the raw request body as bytes (Django: request.body; "
            "Flask: request.get_data(); FastAPI: await request.body()), "
            f"not {type(body).__name__}"
        )
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < math.inf):
        raise ValueError(
            f"tolerance must be a finite positive number of seconds: {tolerance!r}"
        )
    raw = bytes(body)
    found = _signed_headers(headers)
    msg_id = found["webhook-id"]
    timestamp = _timestamp(found["webhook-timestamp"], tolerance, now)
    signatures = _v1_signatures(found["webhook-signature"])
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    expected = hmac.new(key, signed, hashlib.sha256).digest()
    # compare_digest on every candidate: the time taken says nothing of the key.
    if not any([hmac.compare_digest(expected, sig) for sig in signatures]):
        raise InvalidSignature("no signature in webhook-signature matches this secret")
    try:
        return json.loads(raw)
    except ValueError:
        raise InvalidSignature("the signed body is not JSON") from None


def _key(secret: str) -> bytes:
    if not isinstance(secret, str):
        raise TypeError(
            f"secret must be a str (whsec_...), not {type(secret).__name__}"
        )
    if secret.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError(V1A_UNSUPPORTED)
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("secret must be the endpoint's signing secret, whsec_...")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("secret is not whsec_ followed by base64") from None
    if not key:
        raise ValueError("secret is empty after whsec_")
    return key


def _pairs(headers: Any) -> Iterable[tuple[str, str]]:
    items = getattr(headers, "items", None)
    if callable(items):
        return items()
    if isinstance(headers, (str, bytes)) or not isinstance(headers, Iterable):
        raise TypeError("headers must be a mapping or (name, value) pairs")
    return headers


def _signed_headers(headers: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in _pairs(headers):
        lowered = str(name).lower()
        if lowered not in SIGNED_HEADERS:
            continue
        if lowered in found:
            raise InvalidSignature(f"{lowered} is given more than once")
        found[lowered] = str(value).strip()
    for name in SIGNED_HEADERS:
        if not found.get(name):
            raise InvalidSignature(f"the {name} header is missing or empty")
    return found


def _timestamp(value: str, tolerance: float, now: float | None) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise InvalidSignature("webhook-timestamp is not whole Unix seconds")
    sent = int(value)
    now = time.time() if now is None else now
    if sent < now - tolerance:
        raise InvalidSignature(
            f"webhook-timestamp is more than {tolerance:g} s old (a replay, or a "
            "clock behind)"
        )
    if sent > now + tolerance:
        raise InvalidSignature(
            f"webhook-timestamp is more than {tolerance:g} s in the future (a "
            "clock ahead)"
        )
    return sent


def _v1_signatures(header: str) -> list[bytes]:
    """The v1 signatures; raises on a malformed entry or an unknown version."""
    v1: list[bytes] = []
    for entry in header.split():
        version, comma, encoded = entry.partition(",")
        if not comma or not version or not encoded:
            raise InvalidSignature(
                "webhook-signature has an entry that is not version,signature"
            )
        if version == "v1a":
            continue  # a v1 entry beside it may still match
        if version != "v1":
            raise InvalidSignature(
                f"webhook-signature has an unknown version {version!r}"
            )
        try:
            signature = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidSignature("a v1 signature is not base64") from None
        if len(signature) != DIGEST_BYTES:
            raise InvalidSignature("a v1 signature is not an HMAC-SHA256")
        v1.append(signature)
    if not v1:  # every entry was v1a
        raise InvalidSignature(V1A_UNSUPPORTED)
    return v1
