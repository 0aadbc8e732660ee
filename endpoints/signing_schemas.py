"""Request and response shapes of signing in the merchants and endpoints API: a
merchant's public keys (v1a) and an endpoint's secret rotation (v1)."""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from endpoints.secrets import ROTATION_OVERLAP_MAX_SECONDS


class SigningKeyOut(Schema):
    endpoint_id: str
    public_key: str = Field(description="`whpk_` + base64 of the 32-byte key.")
    not_after: datetime | None = Field(
        None, description="Left out unless the key stops signing at this time."
    )


class SigningKeysOut(Schema):
    keys: list[SigningKeyOut]


class RotateSecretIn(Schema):
    overlap_seconds: int | None = Field(
        None,
        ge=0,
        le=ROTATION_OVERLAP_MAX_SECONDS,
        description="How long the previous secret keeps signing beside the new "
        "one: 0 stops it at once (for a leaked secret); left out, the relay's "
        "SECRET_ROTATION_OVERLAP_SECONDS (a day unless the operator set another).",
        examples=[0, 86400],
    )


class SecretRotated(Schema):
    secret: str
    previous_expires_at: datetime
