"""The auth and tls fields of endpoints in the API: what a request gives
(checked whole by endpoints/client_credentials.py) and what answers show."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema

# auth and tls are checked whole by endpoints/client_credentials.py (every
# problem at once, at loc ["body", "auth", "token_url"] and so on), not here:
# a parser's message may quote what it was given, and these hold secrets.
AUTH_DESCRIPTION = (
    "HTTP endpoints only. How each request proves who sends it: "
    '`{"type": "basic", "username", "password"}` (HTTP Basic) or '
    '`{"type": "oauth2", "token_url", "client_id", "client_secret", '
    '"scope"?, "audience"?}` (OAuth2 client credentials: the token is sent as '
    "`Authorization: Bearer`; the token URL must be https, or http where "
    "private destinations are allowed, and passes the same destination "
    "policy as the endpoint URL). The password and client secret "
    "are write-only: a change that leaves them out keeps the stored one while "
    "the type (and, for oauth2, the token URL) stays the same. null removes "
    "auth. A custom `Authorization` header cannot be set beside it. The "
    "endpoint URL must be https while auth is set (http only where "
    "RELAY_ALLOW_PRIVATE_DESTINATIONS is on)."
)
TLS_DESCRIPTION = (
    "HTTP endpoints only. A client certificate for mTLS, "
    '`{"client_cert": PEM chain (leaf first), "client_key": PEM key '
    '(unencrypted), "ca_bundle"?: PEM}` or `{"pkcs12": base64 PKCS#12, '
    '"password"?, "ca_bundle"?}`, and/or `{"ca_bundle": PEM}`: the CA '
    "certificates a receiver with a private CA is checked against (never no "
    "check). The key must match the leaf, and the leaf allow client "
    "authentication; an expired certificate is accepted and shown as expired. "
    "The key is write-only and kept encrypted; tls is replaced whole by a "
    "change. null removes it. The endpoint URL must be https. Keys: RSA of "
    "2048 to 4096 bits, EC on P-256, P-384 or P-521, Ed25519, Ed448. Bounds: "
    "chain 64 KiB and 10 certificates, key 16 KiB, PKCS#12 96 KiB and "
    "2,000,000 key-derivation iterations, bundle 256 KiB and 200 certificates."
)
AUTH_EXAMPLES = [
    {
        "type": "oauth2",
        "token_url": "https://auth.acme.example/oauth/token",
        "client_id": "webhook-relay",
        "client_secret": "…",
        "scope": "webhooks.write",
    }
]
CredentialsObject = Annotated[dict[str, Any], Field(max_length=10)]


class BasicAuthOut(Schema):
    """HTTP Basic auth as answers show it: never the password."""

    type: Literal["basic"]
    username: str


class OAuth2AuthOut(Schema):
    """OAuth2 client credentials as answers show them: never the client secret."""

    type: Literal["oauth2"]
    token_url: str
    client_id: str
    scope: str | None = Field(description="null when not given")
    audience: str | None = Field(description="null when not given")


AuthOut = Annotated[BasicAuthOut | OAuth2AuthOut, Field(discriminator="type")]


class TlsOut(Schema):
    """An endpoint's client certificate as answers show it: never its key."""

    subject: str | None = Field(
        description="The client certificate's subject (RFC 4514); null when "
        "only a CA bundle is set."
    )
    not_after: datetime | None = Field(
        description="When the client certificate expires; null without one."
    )
    ca_bundle: bool = Field(description="Whether a CA bundle of its own is set.")
    expires_soon: bool = Field(
        description="It expires within CLIENT_CERT_EXPIRY_WARNING_DAYS (not yet expired)."
    )
    expired: bool = Field(
        description="It has expired: receivers that check it refuse the handshake."
    )
