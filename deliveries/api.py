"""REST operations for events and deliveries (CONTRACT.md section 3)."""

from __future__ import annotations

import json
from typing import Annotated, TypeVar

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from ninja import Header, Query, Router, Status
from pydantic import BeforeValidator

from deliveries import ingest, selectors
from deliveries.models import Delivery
from deliveries.schemas import (
    DeliveryDetail,
    DeliveryPage,
    EventBatchIn,
    EventBatchOut,
    EventDetail,
    EventIn,
    EventOut,
    Replayed,
)
from deliveries.services import (
    EventInput,
    ReplayRefused,
    delivery_replay,
    event_publish,
)
from endpoints.models import Endpoint
from relayproject.apiauth import idempotency_scope, scoped, visible_merchant
from relayproject.pagination import DEFAULT_LIMIT, MAX_LIMIT, paginate
from relayproject.problems import COMMON_ERRORS, ApiProblem, Problem

router = Router(tags=["events and deliveries"])

T = TypeVar("T")
# `?status=&merchant=` (the form a query template leaves) means "no filter".
BlankIsNone = Annotated[T, BeforeValidator(lambda value: value or None)]


def _merchant_at(request: HttpRequest, slug: str, loc: list):
    try:
        return visible_merchant(request, slug)
    except Http404:
        raise ApiProblem(
            404, f"No merchant {slug!r}.", [{"loc": loc, "msg": "Unknown merchant."}]
        ) from None


@router.post(
    "/events",
    response={200: EventOut, 201: EventOut, 409: Problem, **COMMON_ERRORS},
)
def event_create(
    request: HttpRequest,
    response: HttpResponse,
    payload: EventIn,
    idempotency_key: str | None = Header(
        None, alias="Idempotency-Key", min_length=1, max_length=255
    ),
):
    """Store an event and fan it out. With Idempotency-Key, a retry answers 200
    with the original event and `Idempotent-Replayed: true`."""
    merchant = _merchant_at(request, payload.merchant, ["body", "merchant"])
    if idempotency_key is None:
        event = event_publish(merchant=merchant, type=payload.type, data=payload.data)
        return Status(201, event)
    try:
        event, replayed = ingest.event_publish_idempotent(
            merchant=merchant,
            type=payload.type,
            data=payload.data,
            key=idempotency_key,
            scope=idempotency_scope(request),
        )
    except ingest.IdempotencyInProgress:
        raise ApiProblem(
            409, "A request with this Idempotency-Key is still in progress; retry."
        ) from None
    except ingest.IdempotencyMismatch:
        raise ApiProblem(
            422,
            "This Idempotency-Key was used with a different request body.",
            [
                {
                    "loc": ["header", "Idempotency-Key"],
                    "msg": "Reused with another body.",
                }
            ],
        ) from None
    if not replayed:
        return Status(201, event)
    response["Idempotent-Replayed"] = "true"
    return Status(200, selectors.events_with_deliveries().get(pk=event.pk))


@router.post("/events/batch", response={201: EventBatchOut, **COMMON_ERRORS})
def event_batch_create(request: HttpRequest, payload: EventBatchIn):
    """Up to 500 events, of any merchants, stored in one transaction: all or nothing."""
    too_big = [
        {"loc": ["body", "events", i, "data"], "msg": "Larger than MAX_EVENT_BYTES."}
        for i, item in enumerate(payload.events)
        if len(json.dumps(item.data, separators=(",", ":"))) > settings.MAX_EVENT_BYTES
    ]
    if too_big:
        raise ApiProblem(422, "Some events are too large.", too_big)
    merchants = {}
    items = []
    for i, item in enumerate(payload.events):
        if item.merchant not in merchants:
            loc = ["body", "events", i, "merchant"]
            merchants[item.merchant] = _merchant_at(request, item.merchant, loc)
        items.append(
            (merchants[item.merchant], EventInput(type=item.type, data=item.data))
        )
    return Status(201, {"items": ingest.events_publish_mixed(items=items)})


@router.get("/events/{event_id}", response={200: EventDetail, **COMMON_ERRORS})
def event_get(request: HttpRequest, event_id: str):
    events = scoped(request, selectors.events_with_deliveries(), "merchant_id")
    event = events.filter(pk=event_id).first()
    if event is None:
        raise Http404(f"No event {event_id!r}.")
    return event


@router.get("/deliveries", response={200: DeliveryPage, **COMMON_ERRORS})
def delivery_list(
    request: HttpRequest,
    status: BlankIsNone[Delivery.Status | None] = None,
    merchant: BlankIsNone[str | None] = Query(None, max_length=64),
    endpoint_id: BlankIsNone[str | None] = Query(None, max_length=40),
    cursor: BlankIsNone[str | None] = Query(None, max_length=80),
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
):
    """Newest first; pass next_cursor back as cursor for the following page."""
    merchant_id = None
    if merchant is not None:
        merchant_id = _merchant_at(request, merchant, ["query", "merchant"]).pk
    if endpoint_id is not None and not _endpoint_visible(request, endpoint_id):
        raise ApiProblem(
            404,
            f"No endpoint {endpoint_id!r}.",
            [{"loc": ["query", "endpoint_id"], "msg": "Unknown endpoint."}],
        )
    deliveries = scoped(
        request,
        selectors.deliveries_filtered(
            merchant_id=merchant_id, endpoint_id=endpoint_id, status=status
        ),
        "endpoint__merchant_id",
    )
    return paginate(deliveries, cursor=cursor, limit=limit)


def _endpoint_visible(request: HttpRequest, endpoint_id: str) -> bool:
    return scoped(
        request, Endpoint.objects.filter(pk=endpoint_id), "merchant_id"
    ).exists()


def _visible_delivery(request: HttpRequest, delivery_id: str) -> Delivery:
    deliveries = scoped(
        request, selectors.delivery_with_attempts(), "endpoint__merchant_id"
    )
    delivery = deliveries.filter(pk=delivery_id).first()
    if delivery is None:
        raise Http404(f"No delivery {delivery_id!r}.")
    return delivery


@router.get(
    "/deliveries/{delivery_id}", response={200: DeliveryDetail, **COMMON_ERRORS}
)
def delivery_get(request: HttpRequest, delivery_id: str):
    return _visible_delivery(request, delivery_id)


@router.post(
    "/deliveries/{delivery_id}/replay",
    response={202: Replayed, 409: Problem, **COMMON_ERRORS},
)
def delivery_replay_create(request: HttpRequest, delivery_id: str):
    """Send a dead or succeeded delivery again, with a fresh attempt budget."""
    delivery = _visible_delivery(request, delivery_id)
    try:
        delivery = delivery_replay(delivery_id=delivery.pk)
    except ReplayRefused as exc:
        raise ApiProblem(409, str(exc)) from None
    return Status(202, {"id": delivery.pk, "status": delivery.status})
