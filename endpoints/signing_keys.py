"""Ed25519 signing keys (Standard Webhooks `v1a`): which schemes an endpoint may
sign with, and the key pair it gets when it signs with `v1a`.

`v1` is the HMAC of a shared secret (endpoints/secrets.py); `v1a` an Ed25519
signature a receiver checks with the endpoint's public key, which the relay
publishes; `both` sends the two side by side while receivers move over. An
endpoint's key pair is made the first time it signs with `v1a` and kept when
it goes back to `v1`, so a receiver that pinned the public key keeps
verifying if it comes back. The private key is encrypted at rest like a
signing secret (Endpoint.signing_private_key) and never leaves the relay; the
public key is stored in clear, for the key set and the answers.

Pure, and on the endpoints side because endpoints mint keys while deliveries
only use them (deliveries/signing.py signs).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

V1 = "v1"
V1A = "v1a"
BOTH = "both"
SCHEMES = (V1, V1A, BOTH)
SCHEME_LABELS = {
    V1: "v1: HMAC-SHA256 with the shared secret",
    V1A: "v1a: Ed25519, checked with the public key",
    BOTH: "both: v1 and v1a side by side (while receivers move over)",
}
# Standard Webhooks' prefixes for asymmetric keys; the raw 32 bytes after each.
PUBLIC_KEY_PREFIX = "whpk_"
PRIVATE_KEY_PREFIX = "whsk_"
TOLERANCE_SECONDS = 300  # Standard Webhooks': a replay window of 5 minutes


def signs_v1a(scheme: str) -> bool:
    return scheme in (V1A, BOTH)


def scheme_errors(scheme: object) -> list[str]:
    """What is wrong with a signing scheme ([] when nothing; None: unset)."""
    if scheme is None or scheme in SCHEMES:
        return []
    return [f"Must be one of {', '.join(SCHEMES)}; not {scheme!r}."]


def key_pair_generate() -> tuple[str, str]:
    """A new (private, public) pair: ``whsk_`` + base64 of the 32-byte seed,
    ``whpk_`` + base64 of the 32-byte public key."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return _encoded(PRIVATE_KEY_PREFIX, seed), public_key_of(private)


def public_key_of(private: Ed25519PrivateKey) -> str:
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return _encoded(PUBLIC_KEY_PREFIX, raw)


def v1a_verifies(
    public_key: str, *, body: bytes, headers: Mapping[str, str], now: float
) -> bool:
    """Whether a v1a entry of webhook-signature is `public_key`'s signature of
    the request, sent within TOLERANCE_SECONDS of `now` (unix seconds), as a
    receiver checks it; for the relay's own demo receiver."""
    try:
        msg_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
        if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
            return False
        raw = base64.b64decode(public_key.removeprefix(PUBLIC_KEY_PREFIX))
        key = Ed25519PublicKey.from_public_bytes(raw)
    except (KeyError, ValueError):
        return False
    signed = f"{msg_id}.{timestamp}.".encode() + body
    for entry in headers.get("webhook-signature", "").split(" "):
        version, _, signature = entry.partition(",")
        if version != V1A:
            continue
        try:
            key.verify(base64.b64decode(signature), signed)
        except (InvalidSignature, ValueError):
            continue
        return True
    return False


def _encoded(prefix: str, raw: bytes) -> str:
    return prefix + base64.b64encode(raw).decode("ascii")


# The columns that say how an endpoint signs (Endpoint.signing and its keys).
FIELDS = ["signing", "signing_private_key", "signing_public_key"]


def signing_columns(
    *, scheme: str | None, private_key: str | None
) -> dict[str, object]:
    """The columns for signing with `scheme` (None: unchanged, none), given the
    private key the endpoint has (None: none yet): a key pair is made when
    `scheme` needs one and there is none; a key there is kept whatever the
    scheme."""
    if scheme is None:
        return {}
    columns: dict[str, object] = {"signing": scheme}
    if signs_v1a(scheme) and not private_key:
        private, public = key_pair_generate()
        columns |= {"signing_private_key": private, "signing_public_key": public}
    return columns
