"""Request and response shapes of the merchants and endpoints API: merchants,
endpoints and their verification, portal sessions (signing keys and secret
rotation: endpoints.signing_schemas; event types: endpoints.catalogue_schemas;
kind, url and target: endpoints.destination_schemas)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import StringConstraints

from endpoints import brokers, client_credentials, signing_keys, verification
from endpoints.credentials_schemas import (
    AUTH_DESCRIPTION,
    AUTH_EXAMPLES,
    TLS_DESCRIPTION,
    AuthOut,
    CredentialsObject,
    TlsOut,
)
from endpoints.destination_schemas import (
    KIND_DESCRIPTION,
    TARGET_DESCRIPTION,
    TARGET_EXAMPLES,
    URL_DESCRIPTION,
    Destination,
    Kind,
)
from endpoints.endpoint_fields import VISIBILITY_TIMEOUT_LIMIT
from endpoints.matching import SUBSCRIPTION_RE
from endpoints.models import Endpoint, EndpointHealth, Membership
from relayproject.lib.clock import utcnow

Subscription = Annotated[
    str, StringConstraints(max_length=255, pattern=SUBSCRIPTION_RE.pattern)
]


# The bounds are the operator's (RETRY_MAX_ATTEMPTS_LIMIT, RETRY_MAX_WINDOW_SECONDS,
# HTTP_TIMEOUT_MAX_SECONDS): the services check them, and a 422 names the bound.
MaxAttempts = Annotated[
    int,
    Field(
        ge=1,
        description="Attempts per delivery, at most RETRY_MAX_ATTEMPTS_LIMIT; "
        "null: the merchant's default, else MAX_ATTEMPTS.",
    ),
]
RetrySchedule = Annotated[
    list[int | float],
    Field(
        min_length=1,
        max_length=100,
        description="Delays in seconds between attempts: attempt n+1 waits the "
        "n-th, the last repeating ([5, 30, 300, 3600]); the waits of all "
        "attempts together at most RETRY_MAX_WINDOW_SECONDS. null: the "
        "merchant's default, else the full-jitter backoff (RETRY_BASE_SECONDS, "
        "RETRY_MAX_DELAY_SECONDS).",
        examples=[[5, 30, 300, 3600, 21600, 86400]],
    ),
]
TimeoutSeconds = Annotated[
    float,
    Field(
        description="Per-attempt timeout in seconds, from 1 to "
        "HTTP_TIMEOUT_MAX_SECONDS; null: the merchant's default, else "
        "HTTP_TIMEOUT_SECONDS."
    ),
]
# Checked by the services (endpoints/filtering.py, endpoints/custom_headers.py),
# whose messages name the operator or header at fault.
PayloadFilter = Annotated[
    dict[str, Any],
    Field(
        description="JSON filter on `type` and `data`; see the docs' page "
        "on event types, payload filters and custom headers."
    ),
]
CustomHeaders = Annotated[
    dict[str, str],
    Field(
        description="Up to 20 headers sent with every request; reserved names refused."
    ),
]
RateLimit = Annotated[float, Field(gt=0, le=10000)]
VisibilityTimeout = Annotated[
    int,
    Field(
        ge=1,
        le=VISIBILITY_TIMEOUT_LIMIT,
        description="A pull endpoint's lease: seconds a pulled message stays "
        "its consumer's before it is due again, counted as a spent attempt "
        "(`lease_expired`). `pull` only; null: PULL_VISIBILITY_TIMEOUT_SECONDS.",
    ),
]
MaxInFlight = Annotated[int, Field(ge=1, le=1000)]
# 410 is refused by the service (it always disables the endpoint).
PermanentStatus = Annotated[int, Field(ge=300, le=599)]
Signing = Literal["v1", "v1a", "both"]
SIGNING_DESCRIPTION = (
    "How requests are signed in `webhook-signature`: `v1` (HMAC-SHA256 with the "
    "`whsec_` secret), `v1a` (Ed25519, checked with the endpoint's `public_key`, "
    "also listed at `/merchants/{slug}/signing-keys`) or `both` (the two side "
    "by side, while receivers move from one to the other)."
)

MERCHANT_SIGNING_DESCRIPTION = (
    "How its new endpoints sign when they name no `signing`: `v1`, `v1a` or "
    "`both`; null: the relay's DEFAULT_SIGNING_SCHEME. Taken when an endpoint "
    "is created: changing it changes no existing endpoint."
)

SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"


class MerchantIn(Schema):
    slug: str = Field(
        min_length=1, max_length=64, pattern=SLUG_PATTERN, examples=["acme"]
    )
    name: str = Field(min_length=1, max_length=200, examples=["Acme Payments"])
    # Defaults for the merchant's endpoints that set none of their own.
    retry_schedule: RetrySchedule | None = None
    max_attempts: MaxAttempts | None = None
    timeout_seconds: TimeoutSeconds | None = None


class MerchantPatch(Schema):
    name: str | None = Field(None, min_length=1, max_length=200)
    retry_schedule: RetrySchedule | None = None
    max_attempts: MaxAttempts | None = None
    timeout_seconds: TimeoutSeconds | None = None
    signing: Signing | None = Field(None, description=MERCHANT_SIGNING_DESCRIPTION)

    def changes(self) -> dict:
        """The fields sent; null clears a default (a null name: unchanged)."""
        return {
            field: value
            for field, value in self.dict(exclude_unset=True).items()
            if value is not None or field != "name"
        }


class MerchantOut(Schema):
    slug: str
    name: str
    is_active: bool
    retry_schedule: list[int | float] | None = Field(
        description="Its endpoints' default delays between attempts; null: "
        "the relay's full-jitter backoff."
    )
    max_attempts: int | None = Field(
        description="Its endpoints' default attempts; null: MAX_ATTEMPTS."
    )
    timeout_seconds: float | None = Field(
        description="Its endpoints' default per-attempt timeout; null: "
        "HTTP_TIMEOUT_SECONDS."
    )
    signing: str | None = Field(description=MERCHANT_SIGNING_DESCRIPTION)
    created_at: datetime


class EndpointIn(Schema):
    # kind comes before url and target: their checks read it.
    kind: Kind = Field("http", description=KIND_DESCRIPTION)
    url: Destination | None = Field(
        None,
        description=URL_DESCRIPTION,
        examples=["https://hooks.acme.example/webhooks"],
    )
    target: dict[str, Any] | None = Field(
        None, description=TARGET_DESCRIPTION, examples=TARGET_EXAMPLES
    )
    description: str = Field("", max_length=500, examples=["Order updates"])
    event_types: list[Subscription] = Field(
        default_factory=list, max_length=100, examples=[["order.*", "customer.created"]]
    )
    max_attempts: MaxAttempts | None = None
    rate_limit_per_second: RateLimit | None = None
    filter: PayloadFilter | None = None
    headers: CustomHeaders | None = None
    max_in_flight: MaxInFlight | None = None
    permanent_statuses: list[PermanentStatus] = Field(
        default_factory=list, max_length=50
    )
    retry_schedule: RetrySchedule | None = None
    timeout_seconds: TimeoutSeconds | None = None
    ordered: bool = Field(
        False,
        description="Events sharing an ordering_key are sent one at a time, in "
        "publish order.",
    )
    signing: Signing | None = Field(
        None,
        description=SIGNING_DESCRIPTION + " Left out: the merchant's default, else "
        "the relay's DEFAULT_SIGNING_SCHEME (`v1` unless the operator set another).",
    )
    auth: CredentialsObject | None = Field(
        None, description=AUTH_DESCRIPTION, examples=AUTH_EXAMPLES
    )
    tls: CredentialsObject | None = Field(None, description=TLS_DESCRIPTION)
    visibility_timeout_seconds: VisibilityTimeout | None = None


class EndpointPatch(Schema):
    kind: Kind | None = Field(None, description=KIND_DESCRIPTION)
    url: Destination | None = Field(None, description=URL_DESCRIPTION)
    target: dict[str, Any] | None = Field(
        None, description=TARGET_DESCRIPTION, examples=TARGET_EXAMPLES
    )
    description: str | None = Field(None, max_length=500)
    event_types: list[Subscription] | None = Field(None, max_length=100)
    max_attempts: MaxAttempts | None = None
    rate_limit_per_second: RateLimit | None = None
    filter: PayloadFilter | None = None
    headers: CustomHeaders | None = None
    max_in_flight: MaxInFlight | None = None
    permanent_statuses: list[PermanentStatus] | None = Field(None, max_length=50)
    retry_schedule: RetrySchedule | None = None
    timeout_seconds: TimeoutSeconds | None = None
    ordered: bool | None = None
    signing: Signing | None = Field(None, description=SIGNING_DESCRIPTION)
    is_active: bool | None = None
    auth: CredentialsObject | None = Field(
        None, description=AUTH_DESCRIPTION, examples=AUTH_EXAMPLES
    )
    tls: CredentialsObject | None = Field(None, description=TLS_DESCRIPTION)
    visibility_timeout_seconds: VisibilityTimeout | None = None

    def changes(self) -> dict:
        """The fields sent; null on a field that cannot be empty means "unchanged"."""
        not_nullable = {
            "kind",
            "url",
            "target",
            "description",
            "event_types",
            "ordered",
            "signing",
            "is_active",
        }
        return {
            field: value
            for field, value in self.dict(exclude_unset=True).items()
            if value is not None or field not in not_nullable
        }


class VerificationOut(Schema):
    """Ownership verification (REQUIRE_ENDPOINT_VERIFICATION)."""

    state: str = Field(
        description='"awaiting" (receives only its challenge), "verified", or '
        '"not_required" (made while verification was not required)'
    )
    verified_at: datetime | None
    verified_by: str
    requested_at: datetime | None


class VerifyIn(Schema):
    challenge: str = Field(
        max_length=1024, description="The challenge from the receiver's log."
    )


class EndpointOut(Schema):
    id: str
    merchant: str = Field(alias="merchant.slug")
    kind: str = Field(description=KIND_DESCRIPTION)
    url: str = Field(
        description="Where it sends; a broker URL's password is shown as `***`, "
        "a user or a password alone as `***` whole (give the URL back with "
        "`***` to keep the stored password)."
    )
    target: dict[str, Any] = Field(description=TARGET_DESCRIPTION)
    has_credentials: bool = Field(
        description="Whether a broker URL's user and password are stored "
        "(write-only: they are never shown)."
    )
    description: str
    event_types: list[str]
    is_active: bool
    disabled_reason: str
    max_attempts: int | None
    rate_limit_per_second: float | None
    filter: dict[str, Any] | None
    headers: dict[str, str]
    max_in_flight: int | None
    permanent_statuses: list[int]
    retry_schedule: list[int | float] | None = Field(
        description="Its own delays between attempts; null: its merchant's "
        "default, else the full-jitter backoff."
    )
    timeout_seconds: float | None = Field(
        description="Its own per-attempt timeout; null: its merchant's "
        "default, else HTTP_TIMEOUT_SECONDS."
    )
    ordered: bool
    signing: str = Field(description=SIGNING_DESCRIPTION)
    public_key: str | None = Field(
        description="With `v1a` or `both`, the Ed25519 public key "
        "(`whpk_` + base64 of its 32 bytes) that checks the `v1a` signature; "
        "null with `v1`."
    )
    auth: AuthOut | None = Field(
        description="Its auth without the password or client secret; null: none."
    )
    tls: TlsOut | None = Field(
        description="Its client certificate's subject and expiry and whether a "
        "CA bundle is set, never the key; null: none."
    )
    visibility_timeout_seconds: int | None = Field(
        description="A pull endpoint's own lease in seconds; null: "
        "PULL_VISIBILITY_TIMEOUT_SECONDS (and for every other kind)."
    )
    listen_session: bool = Field(
        description="Made for a run of `listen` (a listen session), which ends "
        "by itself; see /merchants/{slug}/listen-sessions."
    )
    breaker_state: str
    verification: VerificationOut
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_verification(obj: Endpoint) -> dict:
        return {
            "state": verification.state(obj),
            "verified_at": obj.verified_at,
            "verified_by": obj.verified_by,
            "requested_at": obj.verification_requested_at,
        }

    @staticmethod
    def resolve_url(obj: Endpoint) -> str:
        return brokers.broker_url_shown(obj.url, obj.broker_credentials)

    @staticmethod
    def resolve_public_key(obj: Endpoint) -> str | None:
        return obj.signing_public_key if signing_keys.signs_v1a(obj.signing) else None

    @staticmethod
    def resolve_auth(obj: Endpoint) -> dict | None:
        return client_credentials.auth_shown(obj)

    @staticmethod
    def resolve_tls(obj: Endpoint) -> dict | None:
        return client_credentials.tls_shown(obj, now=utcnow())

    @staticmethod
    def resolve_has_credentials(obj: Endpoint) -> bool:
        return bool(obj.broker_credentials)

    @staticmethod
    def resolve_breaker_state(obj: Endpoint) -> str:
        # Endpoints made outside the services get their health row later.
        try:
            return obj.health.breaker_state
        except EndpointHealth.DoesNotExist:
            return EndpointHealth.State.CLOSED


class EndpointCreated(EndpointOut):
    secret: str


class EndpointPage(Schema):
    items: list[EndpointOut]
    next_cursor: str | None


class PortalSessionIn(Schema):
    role: Membership.Role = Membership.Role.VIEWER


class PortalSessionOut(Schema):
    url: str
    expires_at: datetime
