"""Delivery logs, a delivery's request and attempts, replay, and the test event."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse

from deliveries import replay, words
from deliveries.models import Delivery
from deliveries.notifications.selectors import is_failing
from deliveries.ops.held import delivery_held
from deliveries.publish.validation import EventsRefused
from deliveries.pull.leasing import visibility_seconds
from deliveries.services import event_publish
from endpoints import brokers, probes
from endpoints.models import Endpoint
from endpoints.retry_policy import policy_in_force, schedule_words
from relayproject.lib.clock import utcnow
from relayproject.lib.limits import LimitExceeded
from relayproject.portal.access import WRITE, Access, portal_view
from relayproject.portal.forms import DeliveryFilterForm
from relayproject.portal.present import (
    answer_heading,
    curl_command,
    is_broker_url,
    short_url,
    target_words,
)
from relayproject.portal.selectors import (
    deliveries_filtered,
    deliveries_page,
    delivery_request,
)
from relayproject.portal.views.common import page

TEST_EVENT_TYPE = "relay.test"
# Past this the body is folded on the page and downloadable: a 220 KB event
# printed in full (and again in the curl command) made the page 34,000 px tall.
LARGE_BODY_BYTES = 10_000


LOG_FILTERS = ("status", "event_type", "since", "until")


def _filters(form: DeliveryFilterForm) -> dict:
    data = form.cleaned_data
    filters = {name: data.get(name) or None for name in LOG_FILTERS}
    filters["search"] = (data.get("q") or "").strip() or None
    return filters


def _log(request: HttpRequest, access: Access, *, endpoint_id: str | None):
    form = DeliveryFilterForm(request.GET)
    valid = form.is_valid()
    result = None
    if valid:
        result = deliveries_page(
            merchant_id=access.merchant.pk,
            endpoint_id=endpoint_id,
            cursor=form.cleaned_data.get("cursor") or None,
            before=form.cleaned_data.get("before") or None,
            **_filters(form),
        )
    links = {}
    if result is not None:
        query = request.GET.copy()
        for key in ("cursor", "before"):
            query.pop(key, None)
        links["first"] = (
            query.urlencode()
            if (form.cleaned_data.get("cursor") or form.cleaned_data.get("before"))
            else None
        )
        if result.newer_cursor:
            links["newer"] = _with(query, before=result.newer_cursor)
        if result.next_cursor:
            links["older"] = _with(query, cursor=result.next_cursor)
    return page(
        request,
        access,
        "delivery_list.html",
        {
            "form": form,
            "rows": _with_held(result.items) if result else [],
            "valid": valid,
            "links": links,
            "bulk_fields": _bulk_fields(form) if valid else [],
            "show_bulk": valid and form.cleaned_data.get("status") == "dead",
            "bulk_cap": replay.BULK_REPLAY_CAP,
        },
        status=200 if valid else 400,
    )


def _with_held(deliveries) -> list:
    """Each row with why it waits, in the words the admin and API use too,
    its endpoint's URL shortened to fit the column ("" for a pull endpoint,
    which has none), and its last failure in words (a pull endpoint's in
    its consumer's)."""
    now = utcnow()
    return [
        (
            d,
            delivery_held(delivery=d, now=now),
            short_url(d.endpoint.url) if d.endpoint.url else "",
            words.pull_last_error_words(last_error=d.last_error)
            if d.endpoint.kind == brokers.PULL
            else words.last_error_words(
                last_error=d.last_error, status_code=d.last_status_code
            ),
        )
        for d in deliveries
    ]


def _with(query, **params) -> str:
    query = query.copy()
    for key, value in params.items():
        query[key] = value
    return query.urlencode()


def _bulk_fields(form: DeliveryFilterForm) -> list[tuple[str, str]]:
    """The filter, carried as hidden fields into the bulk replay's confirmation."""
    return [
        (name, form.data[name]) for name in ("q", *LOG_FILTERS) if form.data.get(name)
    ]


@portal_view()
def delivery_list(request: HttpRequest, access: Access) -> HttpResponse:
    return _log(request, access, endpoint_id=None)


@portal_view()
def endpoint_deliveries(request: HttpRequest, access: Access) -> HttpResponse:
    return _log(request, access, endpoint_id=access.endpoint.pk)


@portal_view()
def delivery_detail(request: HttpRequest, access: Access) -> HttpResponse:
    delivery = access.delivery
    now = utcnow()
    sent = delivery_request(delivery=delivery)
    attempts = list(delivery.attempts.all())
    body = sent.body.decode("utf-8")
    policy = policy_in_force(delivery.endpoint)
    max_attempts = policy.max_attempts
    used = delivery.attempts_in_budget
    held = delivery_held(delivery=delivery, now=now)
    endpoint = delivery.endpoint
    # Each attempt says by its recorded URL whether it went to a broker (the
    # endpoint may have changed since); one made before URLs were kept, by
    # the endpoint's kind now.
    pulled = endpoint.kind == brokers.PULL
    to_broker_now = endpoint.kind in brokers.BROKER_KINDS
    rows = [
        (a, is_broker_url(a.request_url) if a.request_url else to_broker_now)
        for a in attempts
    ]
    return page(
        request,
        access,
        "delivery_detail.html",
        {
            "delivery": delivery,
            "endpoint": endpoint,
            "attempts": attempts,
            "attempt_rows": rows,
            "answer_heading": answer_heading([broker for _, broker in rows]),
            # A column of dashes says nothing: no status when no attempt had one.
            "show_status": not pulled
            and (not rows or not all(broker for _, broker in rows)),
            "sent_to_broker": is_broker_url(sent.url) if sent.url else to_broker_now,
            "target": target_words(endpoint.kind, endpoint.target),
            # A replay of a succeeded delivery waits with a 200 as its last
            # answer: that is not a failure.
            "last_ok": bool(attempts) and attempts[-1].outcome == "succeeded",
            "held": held,
            "max_attempts": max_attempts,
            # The retry policy in force, and where each part of it comes from.
            "policy": policy,
            "schedule_words": schedule_words(policy.retry_schedule),
            "next_attempt": min(used + 1, max_attempts),
            "progress": words.attempt_progress(
                attempts_used=used, max_attempts=max_attempts
            ),
            "last_failure": words.pull_last_error_words(last_error=delivery.last_error)
            if pulled
            else words.last_error_words(
                last_error=delivery.last_error, status_code=delivery.last_status_code
            ),
            "stop_reason": words.pull_stop_reason(
                status=delivery.status,
                attempts=attempts,
                attempts_used=used,
                last_error=delivery.last_error,
            )
            if pulled
            else words.stop_reason(
                status=delivery.status, attempts=attempts, attempts_used=used
            ),
            "pulled": pulled,
            "visibility_seconds": visibility_seconds(endpoint) if pulled else None,
            "sent": sent,
            "sent_body": body,
            "body_bytes": len(sent.body),
            "large_body": len(sent.body) > LARGE_BODY_BYTES,
            "curl": curl_command(
                sent.url,
                sent.headers,
                body,
                body_file=f"{delivery.pk}.json"
                if len(sent.body) > LARGE_BODY_BYTES
                else None,
            ),
            "in_progress": delivery.status in Delivery.Status.UNFINISHED,
            # Retry now: offered on a pending row; when it could not go now
            # anyway the page says why instead of offering it.
            "retry_refusal": words.retry_now_refusal(held)
            if delivery.status == "pending"
            else None,
            # Paused: the endpoint's Try now is what ends the wait.
            "paused": held is not None and str(held.reason) == "breaker_open",
            # Finished rows only: a row waiting in its lane is not sent yet.
            "can_replay": delivery.status in Delivery.Status.FINISHED,
            "replay_warning": words.replay_lane_warning(
                ordering_key=delivery.ordering_key
            ),
        },
    )


@portal_view()
def delivery_body(request: HttpRequest, access: Access) -> HttpResponse:
    """The body exactly as sent, as a file (the same bytes every attempt)."""
    delivery = access.delivery
    response = HttpResponse(
        delivery_request(delivery=delivery).body, content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{delivery.pk}.json"'
    return response


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
    try:
        replay.delivery_replay(delivery_id=access.delivery.pk, now=utcnow())
    except replay.ReplayRefused:
        messages.error(request, "Only dead or succeeded deliveries can be resent.")
    else:
        held = _held_now(access.delivery.pk)
        said = words.replay_message(delivery_id=access.delivery.pk, held=held)
        (messages.warning if held and held.is_hold else messages.success)(request, said)
    return redirect("portal:delivery_detail", access.merchant.slug, access.delivery.pk)


def _held_now(delivery_id: str):
    """The row's held reason as the database has it now."""
    delivery = Delivery.objects.select_related("endpoint__health").get(pk=delivery_id)
    return delivery_held(delivery=delivery, now=utcnow())


@portal_view(methods=WRITE)
def delivery_retry_now(request: HttpRequest, access: Access) -> HttpResponse:
    """A pending delivery goes now instead of at its retry time, or the page
    says why it cannot."""
    try:
        replay.delivery_retry_now(delivery_id=access.delivery.pk, now=utcnow())
    except replay.RetryRefused as refused:
        messages.error(request, f"Not sent now. {refused}")
    else:
        held = _held_now(access.delivery.pk)
        messages.success(request, words.retry_now_message(held))
    return redirect("portal:delivery_detail", access.merchant.slug, access.delivery.pk)


@portal_view(methods=WRITE)
def endpoint_test(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    try:
        event = event_publish(
            merchant=access.merchant,
            type=TEST_EVENT_TYPE,
            data={"message": "Test event from the webhook-relay portal"},
            ordering_key=request.POST.get("ordering_key", ""),
            endpoint_ids=[endpoint.pk],
            rate_limited=True,
        )
    except LimitExceeded as exc:
        messages.error(request, exc.detail)
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    except EventsRefused as exc:
        # The one validator's limits apply to the test event too (a deployment
        # may set MAX_EVENT_BYTES below it); say which, having sent nothing.
        reasons = " ".join(message for _, _, message in exc.errors)
        messages.error(request, f"Nothing was sent: {reasons}")
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    if not event.created_deliveries:
        messages.error(
            request,
            "Nothing was sent: the endpoint is disabled. Enable it first.",
        )
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    delivery = event.created_deliveries[0]
    # On a paused endpoint the ping is the breaker's probe now rather than at
    # the end of the cooldown (one probe still: probes.endpoint_probe_now).
    probes.endpoint_probe_now(
        endpoint_id=endpoint.pk, merchant_id=endpoint.merchant_id, now=utcnow()
    )
    return redirect("portal:delivery_detail", access.merchant.slug, delivery.pk)


@portal_view(methods=WRITE)
def deliveries_bulk_replay(request: HttpRequest, access: Access) -> HttpResponse:
    """Replay the dead deliveries the log's filter shows: count first, then confirm."""
    form = DeliveryFilterForm(request.POST)
    endpoint_id = request.POST.get("endpoint_id") or None
    back = _log_url(access, endpoint_id)
    if not form.is_valid():
        messages.error(request, "The filter is not valid; nothing was replayed.")
        return redirect(back)
    filters = {**_filters(form), "status": "dead"}
    rows = deliveries_filtered(
        merchant_id=access.merchant.pk, endpoint_id=endpoint_id, **filters
    ).order_by("-pk")
    total = rows.count()
    if request.POST.get("confirm") != "yes":
        return page(
            request,
            access,
            "delivery_bulk_replay.html",
            {
                "total": total,
                "count": min(total, replay.BULK_REPLAY_CAP),
                "cap": replay.BULK_REPLAY_CAP,
                "fields": _bulk_fields(form),
                "filter_words": _filter_words(form),
                "still_failing": _still_failing(access, endpoint_id),
                "endpoint_id": endpoint_id or "",
                "back": back,
            },
        )
    ids = list(rows.values_list("pk", flat=True)[: replay.BULK_REPLAY_CAP])
    count = replay.deliveries_replay_dead(delivery_ids=ids, now=utcnow())
    left = max(total - count, 0)
    said = f"{count} dead deliver{'y is' if count == 1 else 'ies are'} pending again."
    if left:
        said += f" {left} more match the filter: replay again for the next batch."
    messages.success(request, said)
    return redirect(back + "?status=pending")


FILTER_NAMES = {
    "q": "id",
    "event_type": "event type",
    "since": "since",
    "until": "until",
}


def _filter_words(form: DeliveryFilterForm) -> str:
    """The filter being replayed, restated: "event type order.*, since ..."."""
    parts = [
        f"{label} {form.data[name]}"
        for name, label in FILTER_NAMES.items()
        if form.data.get(name)
    ]
    return ", ".join(parts) or "every dead delivery"


def _still_failing(access: Access, endpoint_id: str | None) -> list:
    """Endpoints of the replay that fail now: their replays would likely die again."""
    endpoints = Endpoint.objects.filter(merchant=access.merchant).select_related(
        "health", "watch"
    )
    if endpoint_id:
        endpoints = endpoints.filter(pk=endpoint_id)
    return [e for e in endpoints if is_failing(e) or not e.is_active]


def _log_url(access: Access, endpoint_id: str | None) -> str:
    if endpoint_id:
        return reverse(
            "portal:endpoint_deliveries", args=[access.merchant.slug, endpoint_id]
        )
    return reverse("portal:delivery_list", args=[access.merchant.slug])
