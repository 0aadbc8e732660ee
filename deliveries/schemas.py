"""Request and response shapes of the events and deliveries API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema
from ninja.schema import DjangoGetter
from pydantic import model_validator

from deliveries.models import Delivery
from deliveries.ops.held import delivery_held
from endpoints.matching import EVENT_TYPE_RE, MAX_EVENT_TYPE_LENGTH
from relayproject.lib.clock import utcnow

MAX_BATCH = 500


class EventIn(Schema):
    merchant: str = Field(min_length=1, max_length=64, examples=["acme"])
    type: str = Field(
        min_length=1,
        max_length=MAX_EVENT_TYPE_LENGTH,
        pattern=EVENT_TYPE_RE.pattern,
        examples=["order.paid"],
    )
    # Depth, size, NUL, surrogates and the schema: deliveries.publish.validation,
    # the one validator of every publish path.
    data: dict[str, Any] = Field(examples=[{"order": {"id": 8812, "amount": 1999}}])
    ordering_key: str = Field(
        "",
        max_length=255,
        examples=["order-8812"],
        description="Ordered endpoints get the events sharing it one at a time, "
        "in publish order; empty: unordered.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(cls, values: Any, handler, info):
        """A body's event is a dict: validated as it is. ninja's own validator
        of this name wraps every input in a getter made for model instances,
        a field at a time in Python: 7 % of a batch of 100 (issue 21)."""
        if isinstance(values, dict):
            return handler(values)
        return handler(DjangoGetter(values, cls, info.context))


class EventBatchIn(Schema):
    events: list[EventIn] = Field(min_length=1, max_length=MAX_BATCH)


class DeliveryRef(Schema):
    id: str
    endpoint_id: str
    status: Delivery.Status


class EventOut(Schema):
    id: str
    type: str
    merchant: str
    created_at: datetime
    deliveries: list[DeliveryRef]

    @staticmethod
    def resolve_merchant(obj) -> str:
        # A resolver, not alias="merchant.slug": ninja parses a dotted alias
        # as a template Variable for every event of every answer.
        return obj.merchant.slug

    @staticmethod
    def resolve_deliveries(obj) -> list:
        # A fresh publish carries the rows it made; a stored event is prefetched.
        made = getattr(obj, "created_deliveries", None)
        return made if made is not None else list(obj.deliveries.all())


class EventDetail(EventOut):
    data: dict[str, Any]
    ordering_key: str


class EventBatchOut(Schema):
    items: list[EventOut]


class HeldOut(Schema):
    """Why an unfinished delivery is not moving (see deliveries.ops.held)."""

    reason: str
    text: str
    until: datetime | None


class DeliveryOut(Schema):
    id: str
    event_id: str
    endpoint_id: str
    merchant: str = Field(alias="endpoint.merchant.slug")
    status: Delivery.Status
    attempt_count: int
    next_attempt_at: datetime
    last_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str
    last_response_ms: float | None
    created_at: datetime
    succeeded_at: datetime | None
    dead_at: datetime | None
    ordering_key: str = Field(
        description="Its lane on an ordered endpoint; empty: sent unordered."
    )
    out_of_order: bool = Field(
        description="Replayed out of its lane: sent without waiting its turn."
    )
    held: HeldOut | None = Field(
        None,
        description="Why a pending or delivering row is not moving; null once finished.",
    )

    @staticmethod
    def resolve_held(obj) -> HeldOut | None:
        held = delivery_held(delivery=obj, now=utcnow())
        if held is None:
            return None
        return HeldOut(reason=held.reason.value, text=held.text, until=held.until)


class AttemptOut(Schema):
    number: int
    started_at: datetime
    outcome: str
    status_code: int | None
    response_ms: float | None
    error_kind: str
    error_message: str
    response_excerpt: str = Field(alias="response_body")
    worker_id: str
    # What the attempt sent and got back, as recorded; null on attempts made
    # before these were kept. [[name, value], ...] in order; custom header
    # values and signatures are fingerprints ("redacted, hmac 1a2b3c4d").
    # An answer to a verification challenge keeps no body (response_excerpt
    # says so) and no response headers (null).
    request_url: str | None
    request_headers: list[list[str]] | None
    response_headers: list[list[str]] | None


class DeliveryDetail(DeliveryOut):
    attempts: list[AttemptOut]

    @staticmethod
    def resolve_attempts(obj) -> list:
        return list(obj.attempts.all())


class DeliveryPage(Schema):
    items: list[DeliveryOut]
    next_cursor: str | None


class Replayed(Schema):
    id: str
    status: Delivery.Status


class RecoverIn(Schema):
    since: datetime
    until: datetime | None = None
    dry_run: bool = False


class RecoverOut(Schema):
    count: int
