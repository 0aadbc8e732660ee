"""The encryption key DEBUG runs use when RELAY_ENCRYPTION_KEYS is not set."""

from __future__ import annotations

import base64
import hashlib


def development_key(secret_key: str) -> str:
    """A Fernet key fixed per SECRET_KEY, never production's (settings use it
    only with DEBUG)."""
    digest = hashlib.sha256(f"relay-dev-encryption:{secret_key}".encode()).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")
