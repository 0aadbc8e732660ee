"""The admin's acting views: replay, replay all dead of an endpoint, pipeline health.

Each parses the request, calls one service or selector, writes the admin log
and answers with a message; the work itself is in services and selectors.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    QueryDict,
)
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View

from deliveries import selectors, words
from deliveries.admin.columns import EndpointFilter
from deliveries.models import Delivery
from deliveries.ops import alerts, charts, latency
from deliveries.ops.held import delivery_held, human_seconds
from deliveries.ops.summary import WINDOWS, dead_letter_analysis, minute_series
from deliveries.replay import (
    ReplayRefused,
    RetryRefused,
    deliveries_recover,
    delivery_replay,
    delivery_retry_now,
)
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow

DEFAULT_WINDOW = "24h"
BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)


def _disabled_note(endpoint: Endpoint) -> str:
    reason = f" ({endpoint.disabled_reason})" if endpoint.disabled_reason else ""
    return (
        f"endpoint {endpoint.pk} is disabled{reason}: it stays pending and is "
        "not sent until the endpoint is enabled"
    )


def replay_one(
    model_admin: admin.ModelAdmin, request: HttpRequest, delivery: Delivery
) -> bool:
    """Replay one delivery, log it and say what happened; False when refused."""
    try:
        delivery_replay(delivery_id=delivery.pk, now=utcnow())
    except ReplayRefused as refused:
        model_admin.message_user(request, f"Not replayed: {refused}.", messages.ERROR)
        return False
    model_admin.log_change(request, delivery, "Replayed (fresh attempt budget)")
    # Said from the row as it is now: a paused endpoint holds it, a disabled
    # one keeps it, otherwise it is due at once.
    held = _held_now(delivery.pk)
    model_admin.message_user(
        request,
        words.replay_message(delivery_id=delivery.pk, held=held),
        messages.WARNING if held is not None and held.is_hold else messages.SUCCESS,
    )
    return True


def _held_now(delivery_id: str):
    delivery = Delivery.objects.select_related("endpoint__health").get(pk=delivery_id)
    return delivery_held(delivery=delivery, now=utcnow())


def replay_many(model_admin: admin.ModelAdmin, request: HttpRequest, queryset) -> None:
    """The bulk action: one replay per selected row, one message for all."""
    replayed, refused, disabled = [], [], set()
    for delivery in queryset.select_related("endpoint"):
        try:
            delivery_replay(delivery_id=delivery.pk, now=utcnow())
        except ReplayRefused:
            refused.append(delivery.pk)
            continue
        replayed.append(delivery)
        if not delivery.endpoint.is_active:
            disabled.add(delivery.endpoint)
    for delivery in replayed:
        model_admin.log_change(request, delivery, "Replayed (bulk action)")
    if replayed:
        model_admin.message_user(request, f"Replayed {len(replayed)} deliveries.")
    for endpoint in sorted(disabled, key=lambda e: e.pk):
        model_admin.message_user(
            request, f"Note: {_disabled_note(endpoint)}.", messages.WARNING
        )
    if refused:
        model_admin.message_user(
            request,
            f"Not replayed (pending or in flight): {', '.join(refused)}.",
            messages.ERROR,
        )


class AdminView(View):
    admin: admin.ModelAdmin = None

    def require(self, request: HttpRequest, action: str) -> None:
        if not request.user.has_perm(f"deliveries.{action}_delivery"):
            raise PermissionDenied


class ReplayView(AdminView):
    """POST only: a GET link would let a crawler or a prefetch replay deliveries."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self.require(request, "change")
        delivery = get_object_or_404(
            Delivery.objects.select_related("endpoint"), pk=object_id
        )
        replay_one(self.admin, request, delivery)
        target = request.GET.get("next", "")
        if not url_has_allowed_host_and_scheme(
            target,
            allowed_hosts={request.get_host()},
            require_https=request.is_secure(),
        ):
            target = reverse("admin:deliveries_delivery_change", args=[delivery.pk])
        return HttpResponseRedirect(target)


class RetryNowView(AdminView):
    """POST: a pending delivery goes now instead of at its retry time, or the
    message says why it cannot."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self.require(request, "change")
        delivery = get_object_or_404(Delivery, pk=object_id)
        try:
            delivery_retry_now(delivery_id=delivery.pk, now=utcnow())
        except RetryRefused as refused:
            self.admin.message_user(
                request, f"Not retried now. {refused}", messages.ERROR
            )
        else:
            self.admin.log_change(request, delivery, "Retry now")
            self.admin.message_user(
                request, words.retry_now_message(_held_now(delivery.pk))
            )
        return HttpResponseRedirect(
            reverse("admin:deliveries_delivery_change", args=[delivery.pk])
        )


class ReplayEndpointDeadView(AdminView):
    """GET: how many would be replayed, and a confirm button; POST: replay them."""

    def _endpoint(self, endpoint_id: str) -> Endpoint:
        try:
            return Endpoint.objects.select_related("merchant").get(pk=endpoint_id)
        except Endpoint.DoesNotExist:
            raise Http404("no such endpoint") from None

    def get(self, request: HttpRequest, endpoint_id: str) -> HttpResponse:
        self.require(request, "change")
        endpoint = self._endpoint(endpoint_id)
        context = {
            **self.admin.admin_site.each_context(request),
            "opts": self.admin.opts,
            "title": "Replay all dead deliveries of an endpoint?",
            "endpoint": endpoint,
            "count": selectors.dead_count_of_endpoint(endpoint_id=endpoint.pk),
        }
        return TemplateResponse(
            request, "admin/deliveries/deadletter/replay_endpoint.html", context
        )

    def post(self, request: HttpRequest, endpoint_id: str) -> HttpResponse:
        self.require(request, "change")
        endpoint = self._endpoint(endpoint_id)
        count = deliveries_recover(endpoint=endpoint, since=BEGINNING, now=utcnow())
        # One entry on the endpoint: the rows may be thousands, and the entry
        # says who replayed what, and when.
        self.admin.log_change(
            request, endpoint, f"Replayed all {count} dead deliveries of this endpoint"
        )
        if endpoint.is_active:
            self.admin.message_user(
                request, f"Replayed {count} dead deliveries of {endpoint.pk}."
            )
        else:
            self.admin.message_user(
                request,
                f"Replayed {count} dead deliveries of {endpoint.pk}, but "
                f"{_disabled_note(endpoint)}.",
                messages.WARNING,
            )
        return HttpResponseRedirect(reverse("admin:deliveries_deadletter_changelist"))


def pop_window(query: QueryDict) -> tuple[str, QueryDict]:
    """The analysis window from the query string, and the query string without it."""
    query = query.copy()
    window = query.pop("window", [DEFAULT_WINDOW])[-1]
    if window not in WINDOWS:
        window = DEFAULT_WINDOW
    return window, query


def analysis_context(*, window: str, now: datetime, query: QueryDict) -> dict:
    """The analysis above the dead-letter list: of the endpoint the list is
    filtered to, when it is (EndpointFilter), else of every endpoint."""
    endpoint_id = query.get(EndpointFilter.parameter_name) or None
    return {
        "window": window,
        "windows": list(WINDOWS),
        "window_query": query.urlencode(),
        "analysis_endpoint": endpoint_id,
        "analysis": dead_letter_analysis(
            since=now - WINDOWS[window], until=now, endpoint_id=endpoint_id
        ),
    }


class PipelineView(AdminView):
    def get(self, request: HttpRequest) -> HttpResponse:
        self.require(request, "view")
        now = utcnow()
        summary = alerts.pipeline_summary(now=now)
        alive, stale = alerts.dispatchers(now=now)
        waits, waits_at = latency.publish_latency_recent(now=now)
        context = {
            **self.admin.admin_site.each_context(request),
            "opts": self.admin.opts,
            "title": "Pipeline health",
            "summary": summary,
            "oldest_age": human_seconds(summary.oldest_pending_age_seconds),
            "avg_latency": human_seconds(summary.avg_latency_seconds_last_hour),
            "chart": charts.minute_chart(minute_series(now=now)),
            "latency_rows": latency.latency_rows(waits),
            "latency_at": waits_at,
            "alive": alive,
            "stale": stale,
            "dispatcher_rows": [
                (d, alerts.dispatcher_state(d, now=now)) for d in [*stale, *alive]
            ],
            # From the rows already read (the page's query count stays put);
            # all-time totals are /metrics' counters.
            "rescue_totals": (
                sum(d.deaths for d in [*alive, *stale]),
                sum(d.released for d in [*alive, *stale]),
            ),
            "dead_after": f"{settings.DISPATCHER_DEAD_AFTER_SECONDS:g}",
        }
        return TemplateResponse(request, "admin/deliveries/pipeline.html", context)
