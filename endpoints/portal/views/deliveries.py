"""Delivery logs, a delivery's request and attempts, replay, and the test event."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect

from endpoints.portal.access import WRITE, Access, portal_view
from endpoints.portal.forms import DeliveryFilterForm
from endpoints.portal.views.common import page
from relayproject.clock import utcnow

TEST_EVENT_TYPE = "relay.test"
IN_PROGRESS = ("pending", "delivering")


def _log(request: HttpRequest, access: Access, *, endpoint_id: str | None):
    from deliveries.portal_selectors import deliveries_page

    form = DeliveryFilterForm(request.GET)
    filters = form.cleaned_data if form.is_valid() else {}
    result = deliveries_page(
        merchant_id=access.merchant.pk,
        endpoint_id=endpoint_id,
        status=filters.get("status") or None,
        event_type=filters.get("event_type") or None,
        since=filters.get("since"),
        until=filters.get("until"),
        cursor=filters.get("cursor") or None,
    )
    query = request.GET.copy()
    next_query = None
    if result.next_cursor:
        query["cursor"] = result.next_cursor
        next_query = query.urlencode()
    return page(
        request,
        access,
        "delivery_list.html",
        {"form": form, "deliveries": result.items, "next_query": next_query},
    )


@portal_view()
def delivery_list(request: HttpRequest, access: Access) -> HttpResponse:
    return _log(request, access, endpoint_id=None)


@portal_view()
def endpoint_deliveries(request: HttpRequest, access: Access) -> HttpResponse:
    return _log(request, access, endpoint_id=access.endpoint.pk)


@portal_view()
def delivery_detail(request: HttpRequest, access: Access) -> HttpResponse:
    from deliveries.portal_selectors import delivery_request

    delivery = access.delivery
    sent = delivery_request(delivery=delivery, now=utcnow())
    return page(
        request,
        access,
        "delivery_detail.html",
        {
            "delivery": delivery,
            "endpoint": delivery.endpoint,
            "attempts": list(delivery.attempts.all()),
            "sent_headers": sent.headers,
            "sent_body": sent.body.decode("utf-8"),
            "in_progress": delivery.status in IN_PROGRESS,
            "can_replay": delivery.status not in IN_PROGRESS,
        },
    )


@portal_view()
def delivery_status(request: HttpRequest, access: Access) -> JsonResponse:
    delivery = access.delivery
    return JsonResponse(
        {
            "id": delivery.pk,
            "status": delivery.status,
            "attempt_count": delivery.attempt_count,
            "last_status_code": delivery.last_status_code,
            "last_error": delivery.last_error,
        }
    )


@portal_view(methods=WRITE)
def delivery_replay(request: HttpRequest, access: Access) -> HttpResponse:
    from deliveries.services import ReplayRefused, delivery_replay

    try:
        delivery_replay(delivery_id=access.delivery.pk)
        messages.success(request, "Replayed: the delivery is pending again.")
    except ReplayRefused:
        messages.error(request, "Only dead or succeeded deliveries can be replayed.")
    return redirect("portal:delivery_detail", access.merchant.slug, access.delivery.pk)


@portal_view(methods=WRITE)
def endpoint_test(request: HttpRequest, access: Access) -> HttpResponse:
    from deliveries.services import event_publish

    endpoint = access.endpoint
    event = event_publish(
        merchant=access.merchant,
        type=TEST_EVENT_TYPE,
        data={"message": "Test event from the webhook-relay portal"},
        endpoint_ids=[endpoint.pk],
    )
    if not event.created_deliveries:
        messages.error(
            request,
            "Nothing was sent: the endpoint is disabled. Enable it first.",
        )
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    delivery = event.created_deliveries[0]
    return redirect("portal:delivery_detail", access.merchant.slug, delivery.pk)
