"""Request and response shapes of the merchants and endpoints API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import AfterValidator, StringConstraints

from endpoints import verification
from endpoints.matching import EVENT_TYPE_RE, MAX_EVENT_TYPE_LENGTH, SUBSCRIPTION_RE
from endpoints.models import Endpoint, EndpointHealth, Membership

Subscription = Annotated[
    str, StringConstraints(max_length=255, pattern=SUBSCRIPTION_RE.pattern)
]


def _allowed_destination(url: str) -> str:
    """The destination policy, run with the other field checks so one 422 names all."""
    from django.core.exceptions import ValidationError

    from endpoints.services import endpoint_url_check

    try:
        endpoint_url_check(url)
    except ValidationError as exc:
        raise ValueError(exc.message_dict["url"][0]) from None
    return url


Destination = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2000),
    AfterValidator(_allowed_destination),
]
MaxAttempts = Annotated[int, Field(ge=1, le=100)]
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
MaxInFlight = Annotated[int, Field(ge=1, le=1000)]
# 410 is refused by the service (it always disables the endpoint).
PermanentStatus = Annotated[int, Field(ge=300, le=599)]


SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"


class MerchantIn(Schema):
    slug: str = Field(
        min_length=1, max_length=64, pattern=SLUG_PATTERN, examples=["acme"]
    )
    name: str = Field(min_length=1, max_length=200, examples=["Acme Payments"])


class MerchantOut(Schema):
    slug: str
    name: str
    is_active: bool
    created_at: datetime


class EndpointIn(Schema):
    url: Destination = Field(examples=["https://hooks.acme.example/webhooks"])
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
    ordered: bool = Field(
        False,
        description="Events sharing an ordering_key are sent one at a time, in "
        "publish order.",
    )


class EndpointPatch(Schema):
    url: Destination | None = None
    description: str | None = Field(None, max_length=500)
    event_types: list[Subscription] | None = Field(None, max_length=100)
    max_attempts: MaxAttempts | None = None
    rate_limit_per_second: RateLimit | None = None
    filter: PayloadFilter | None = None
    headers: CustomHeaders | None = None
    max_in_flight: MaxInFlight | None = None
    permanent_statuses: list[PermanentStatus] | None = Field(None, max_length=50)
    ordered: bool | None = None
    is_active: bool | None = None

    def changes(self) -> dict:
        """The fields sent; null on a field that cannot be empty means "unchanged"."""
        not_nullable = {"url", "description", "event_types", "ordered", "is_active"}
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
    url: str
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
    ordered: bool
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


class SecretRotated(Schema):
    secret: str
    previous_expires_at: datetime


class PortalSessionIn(Schema):
    role: Membership.Role = Membership.Role.VIEWER


class PortalSessionOut(Schema):
    url: str
    expires_at: datetime


EventTypeName = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_EVENT_TYPE_LENGTH, pattern=EVENT_TYPE_RE.pattern
    ),
]


class EventTypeIn(Schema):
    name: EventTypeName = Field(examples=["order.paid"])
    description: str = Field(
        "", max_length=2000, examples=["A customer paid for an order."]
    )
    schema_: dict[str, Any] | None = Field(
        None,
        alias="schema",
        examples=[
            {
                "type": "object",
                "required": ["order"],
                "properties": {"order": {"type": "object"}},
            }
        ],
    )
    example: Any = Field(None, examples=[{"order": {"id": 8812, "amount": 1999}}])
    deprecated: bool = False


class EventTypePatch(Schema):
    description: str | None = Field(None, max_length=2000)
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    example: Any = None
    deprecated: bool | None = None


class EventTypeOut(Schema):
    name: str
    description: str
    schema_: dict[str, Any] | None = Field(alias="schema")
    example: Any
    deprecated: bool
    created_at: datetime
    updated_at: datetime


class EventTypePage(Schema):
    items: list[EventTypeOut]
    next_cursor: str | None
