"""REST operations for events and deliveries (CONTRACT.md section 3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, TypeVar

from django.http import Http404, HttpRequest, HttpResponse
from ninja import Header, Query, Router, Status
from ninja.responses import NinjaJSONEncoder
from pydantic import BeforeValidator

from deliveries import selectors
from deliveries.models import Delivery
from deliveries.publish import ingest
from deliveries.publish.validation import EventsRefused
from deliveries.replay import ReplayRefused, deliveries_recover, delivery_replay
from deliveries.schemas import (
    DeliveryDetail,
    DeliveryPage,
    EventBatchIn,
    EventBatchOut,
    EventDetail,
    EventIn,
    EventOut,
    RecoverIn,
    RecoverOut,
    Replayed,
)
from deliveries.signing import format_timestamp
from endpoints.apikeys import (
    api_key,
    idempotency_scope,
    merchant_acted_for,
    scoped,
    visible_endpoint,
    visible_merchant,
)
from endpoints.models import Endpoint
from endpoints.switched_off import MerchantSwitchedOff
from relayproject.lib.clock import utcnow
from relayproject.lib.pagination import DEFAULT_LIMIT, MAX_LIMIT, paginate
from relayproject.lib.plainerrors import fields_detail
from relayproject.lib.problems import COMMON_ERRORS, ApiProblem, Problem

router = Router(tags=["events and deliveries"])
# An endpoint's deliveries, at the endpoint's URL: listed with the endpoint
# operations (relayproject/api.py mounts it between endpoints' two routers).
endpoint_router = Router(tags=["merchants and endpoints"])

T = TypeVar("T")
# `?status=&merchant=` (the form a query template leaves) means "no filter".
BlankIsNone = Annotated[T, BeforeValidator(lambda value: value or None)]


def _unknown_merchant(slug: str, loc: list) -> ApiProblem:
    return ApiProblem(
        404, f"No merchant {slug!r}.", [{"loc": loc, "msg": "Unknown merchant."}]
    )


def _merchant_at(request: HttpRequest, slug: str, loc: list):
    try:
        return visible_merchant(request, slug)
    except Http404:
        raise _unknown_merchant(slug, loc) from None


def _only_merchant(request: HttpRequest) -> int | None:
    key = api_key(request)
    return None if key.is_platform else key.merchant_id


def _switched_off(exc: MerchantSwitchedOff, loc: list) -> ApiProblem:
    return ApiProblem(403, str(exc), [{"loc": loc, "msg": "Switched off by staff."}])


def _refused(exc: EventsRefused, prefix: Callable[[int], list]) -> ApiProblem:
    errors = [
        {"loc": [*prefix(index), *loc], "msg": msg} for index, loc, msg in exc.errors
    ]
    return ApiProblem(422, fields_detail(errors), errors)


@router.post(
    "/events",
    response={
        200: EventOut,
        201: EventOut,
        409: Problem,
        429: Problem,
        **COMMON_ERRORS,
    },
    summary="Publish an event",
)
def event_create(
    request: HttpRequest,
    payload: EventIn,
    idempotency_key: str | None = Header(
        None, alias="Idempotency-Key", min_length=1, max_length=255
    ),
):
    """Store an event and fan it out. With Idempotency-Key, a retry answers 200
    with the original event and `Idempotent-Replayed: true`. Past the
    merchant's publish rate, 429 with Retry-After; past a quota, 422 naming it."""
    try:
        event, replayed = ingest.event_ingest(
            merchant=payload.merchant,
            type=payload.type,
            data=payload.data,
            ordering_key=payload.ordering_key,
            only_merchant=_only_merchant(request),
            key=idempotency_key,
            scope=idempotency_scope(request) if idempotency_key else "",
        )
    except ingest.UnknownMerchant as exc:
        raise _unknown_merchant(exc.slug, ["body", "merchant"]) from None
    except MerchantSwitchedOff as exc:
        raise _switched_off(exc, ["body", "merchant"]) from None
    except EventsRefused as exc:
        raise _refused(exc, lambda index: ["body"]) from None
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
    # Built as the batch's answer is (below), for the same reason: a tenth
    # of a single publish went to ninja validating the event it was given.
    answer = _answer(_event_out(event), status=200 if replayed else 201)
    if replayed:
        answer["Idempotent-Replayed"] = "true"
    return answer


@router.post(
    "/events/batch",
    response={201: EventBatchOut, 429: Problem, **COMMON_ERRORS},
    summary="Publish a batch of events",
)
def event_batch_create(request: HttpRequest, payload: EventBatchIn):
    """Up to 500 events, of any merchants, stored in one transaction: all or nothing.
    Each event counts against its merchant's publish rate (429 with Retry-After)."""
    try:
        events = ingest.events_ingest(
            items=[
                (e.merchant, e.type, e.data, e.ordering_key) for e in payload.events
            ],
            only_merchant=_only_merchant(request),
        )
    except ingest.UnknownMerchant as exc:
        loc = ["body", "events", exc.index, "merchant"]
        raise _unknown_merchant(exc.slug, loc) from None
    except MerchantSwitchedOff as exc:
        loc = ["body", "events", exc.index, "merchant"]
        raise _switched_off(exc, loc) from None
    except EventsRefused as exc:
        raise _refused(exc, lambda index: ["body", "events", index]) from None
    # The answer as EventBatchOut would dump it, built here: having ninja
    # validate the events it was just given (pydantic, through its getters)
    # was a third of a batch's time (issue 21). The same bytes, which
    # tests/api/test_events.py holds it to; the OpenAPI document still
    # comes from the response= above. Rendered as the API's renderer would
    # (relayproject/api.py, which this module must not import): ninja's
    # encoder, timestamps already in the webhook body's one shape.
    return _answer({"items": [_event_out(e) for e in events]}, status=201)


def _answer(body: dict, *, status: int) -> HttpResponse:
    return HttpResponse(
        json.dumps(body, cls=NinjaJSONEncoder),
        status=status,
        content_type="application/json; charset=utf-8",
    )


def _event_out(event) -> dict:
    """A just-published event as EventOut dumps it: its fields, in order."""
    return {
        "id": event.pk,
        "type": event.type,
        "merchant": event.merchant.slug,
        "created_at": format_timestamp(event.created_at),
        "deliveries": [
            {"id": d.pk, "endpoint_id": d.endpoint_id, "status": d.status}
            for d in event.created_deliveries
        ],
    }


@router.get(
    "/events/{event_id}",
    response={200: EventDetail, **COMMON_ERRORS},
    summary="Get an event and its deliveries",
)
def event_get(request: HttpRequest, event_id: str):
    events = scoped(request, selectors.events_with_deliveries(), "merchant_id")
    event = events.filter(pk=event_id).first()
    if event is None:
        raise Http404(f"No event {event_id!r}.")
    return event


@router.get(
    "/deliveries",
    response={200: DeliveryPage, **COMMON_ERRORS},
    summary="List deliveries",
)
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
    "/deliveries/{delivery_id}",
    response={200: DeliveryDetail, **COMMON_ERRORS},
    summary="Get a delivery and its attempts",
)
def delivery_get(request: HttpRequest, delivery_id: str):
    return _visible_delivery(request, delivery_id)


@router.post(
    "/deliveries/{delivery_id}/replay",
    response={202: Replayed, 409: Problem, **COMMON_ERRORS},
    summary="Replay a delivery",
)
def delivery_replay_create(request: HttpRequest, delivery_id: str):
    """Send a dead or succeeded delivery again, with a fresh attempt budget."""
    delivery = _visible_delivery(request, delivery_id)
    merchant_acted_for(request, delivery.endpoint.merchant)
    try:
        delivery = delivery_replay(delivery_id=delivery.pk, now=utcnow())
    except ReplayRefused as exc:
        raise ApiProblem(409, str(exc)) from None
    return Status(202, {"id": delivery.pk, "status": delivery.status})


@endpoint_router.post(
    "/merchants/{slug}/endpoints/{endpoint_id}/recover",
    response={202: RecoverOut, **COMMON_ERRORS},
    # The published id, from when the operation lived in endpoints/api.py.
    operation_id="endpoints_api_endpoint_recover",
    summary="Recover an endpoint's failed deliveries",
)
def endpoint_recover(
    request: HttpRequest, slug: str, endpoint_id: str, payload: RecoverIn
):
    """Dead deliveries created in [since, until) back to pending; dry_run only counts."""
    endpoint = visible_endpoint(request, slug, endpoint_id)
    count = deliveries_recover(
        endpoint=endpoint,
        since=payload.since,
        until=payload.until,
        dry_run=payload.dry_run,
        now=utcnow(),
    )
    return Status(202, {"count": count})
