"""Endpoint signing secrets: the Standard Webhooks `whsec_` format.

Pure, and on the endpoints side because endpoints mint secrets while
deliveries only use them (deliveries points at endpoints, never back).
"""

from __future__ import annotations

import base64
from secrets import token_bytes

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
# The longest a rotation may keep the previous secret signing (Svix's grace
# period goes as far): past a week a leaked secret lingers too long.
ROTATION_OVERLAP_MAX_SECONDS = 7 * 24 * 3600


def generate_secret() -> str:
    """Return a new endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(token_bytes(SECRET_BYTES)).decode("ascii")
