"""Request and response shapes of pull endpoints' messages and of listen
sessions (deliveries/pull_api.py; the pieces behind them: deliveries/pull/)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import StringConstraints

from deliveries.pull import sessions
from deliveries.pull.acks import MAX_IDS
from endpoints import signing_keys
from endpoints.models import Endpoint, EndpointHealth
from endpoints.schemas import PayloadFilter, Subscription

DeliveryId = Annotated[str, StringConstraints(min_length=1, max_length=40)]
Ids = Annotated[
    list[DeliveryId],
    Field(
        min_length=1,
        max_length=MAX_IDS,
        description="Ids of messages this endpoint's last pulls handed out.",
    ),
]


class MessageOut(Schema):
    id: str = Field(description="The delivery's id: ack or nack it by this.")
    attempt: int = Field(description="Counted from 1, as X-Relay-Attempt.")
    headers: dict[str, str] = Field(
        description="The headers a POST would have carried: webhook-id, "
        "webhook-timestamp, webhook-signature, X-Relay-*, Content-Type."
    )
    body: str = Field(
        description="The exact body the signature covers (its UTF-8 bytes)."
    )
    lease_expires_at: datetime = Field(
        description="Ack or nack it before then; after, it is due again and "
        "this attempt is spent (`lease_expired`)."
    )


class MessagePage(Schema):
    items: list[MessageOut]


class AckIn(Schema):
    ids: Ids


class NackIn(Schema):
    ids: Ids
    retry_after_seconds: float | None = Field(
        None,
        ge=0,
        description="Due again after this many seconds, at most "
        "RETRY_MAX_DELAY_SECONDS; left out: the endpoint's retry policy. A nack "
        "of its last allowed attempt makes it dead instead.",
    )


class AckOut(Schema):
    acked: list[str]
    rejected: list[str] = Field(
        description="Ids not this endpoint's, never handed out, already "
        "answered, or whose lease ran out: nothing changed for them."
    )


class NackOut(Schema):
    nacked: list[str]
    rejected: list[str] = Field(
        description="Ids not this endpoint's, never handed out, already "
        "answered, or whose lease ran out: nothing changed for them."
    )


class ListenSessionIn(Schema):
    event_types: list[Subscription] = Field(
        default_factory=list, max_length=100, examples=[["order.*"]]
    )
    filter: PayloadFilter | None = None
    description: str = Field("", max_length=500)


class ListenSessionOut(Schema):
    id: str = Field(
        description="Its pull endpoint's id: pull, ack and nack its messages "
        "at /merchants/{slug}/endpoints/{id}/messages."
    )
    description: str
    event_types: list[str]
    filter: dict[str, Any] | None
    state: str = Field(description='"live", or "ended" (ends are final).')
    created_at: datetime
    expires_at: datetime | None = Field(
        description="When it ends unless pulled before (each pull moves it "
        "LISTEN_IDLE_SECONDS ahead); once ended, when it ended."
    )
    last_pulled_at: datetime | None
    ended_reason: str = Field(description='Why it ended; "" while live.')
    signing: str = Field(
        description="How its messages are signed: `v1` (HMAC with the secret), "
        "`v1a` (Ed25519, checked with `public_key`) or `both`: the merchant's "
        "default scheme."
    )
    public_key: str | None = Field(
        description="With `v1a` or `both`, the Ed25519 public key (whpk_...)."
    )

    @staticmethod
    def resolve_state(obj: Endpoint) -> str:
        return "live" if sessions.session_is_live(obj) else "ended"

    @staticmethod
    def resolve_ended_reason(obj: Endpoint) -> str:
        return "" if sessions.session_is_live(obj) else obj.disabled_reason

    @staticmethod
    def resolve_public_key(obj: Endpoint) -> str | None:
        return obj.signing_public_key if signing_keys.signs_v1a(obj.signing) else None

    @staticmethod
    def resolve_expires_at(obj: Endpoint) -> datetime | None:
        return _health_read(obj, "session_expires_at")

    @staticmethod
    def resolve_last_pulled_at(obj: Endpoint) -> datetime | None:
        return _health_read(obj, "last_pulled_at")


def _health_read(obj: Endpoint, name: str) -> datetime | None:
    try:
        return getattr(obj.health, name)
    except EndpointHealth.DoesNotExist:  # made outside the services
        return None


class ListenSessionCreated(ListenSessionOut):
    secret: str = Field(
        description="Its signing secret (whsec_...), shown only here: check "
        "each message's webhook-signature with it."
    )


class ListenSessionPage(Schema):
    items: list[ListenSessionOut]
    next_cursor: str | None
