"""Pipeline health's alerts: one check per condition, all in one list.

Pipeline health (admin) shows a line per alert and `relay_status --check`
exits non-zero when there is any; both get them from `pipeline_alerts()`.
To add a condition, write a check `(summary) -> list[Alert]` beside these and
append it to CHECKS; it reads what it needs with bounded, indexed queries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, QuerySet

from deliveries.models import Attempt, Delivery, DispatcherHeartbeat
from deliveries.notifications.selectors import failure_alerts
from deliveries.ops import counters
from deliveries.ops.held import human_seconds, when
from deliveries.ops.summary import DAY, Alert, PipelineSummary, pipeline_counts
from deliveries.words import error_words
from endpoints import breaker
from endpoints import words as endpoint_words
from endpoints.models import Endpoint, EndpointHealth

OLDEST_PENDING_ALERT = timedelta(minutes=30)


@dataclass(frozen=True)
class HeldEndpoint:
    """An endpoint whose rows do not move: breaker not closed, or disabled."""

    endpoint_id: str
    url: str
    state: str  # "open", "half_open" or "disabled"
    since: datetime | None
    reason: str
    next_probe_at: datetime | None
    held: int  # pending and delivering rows of the endpoint


def _held_counts(endpoint_ids: list[str]) -> dict[str, int]:
    if not endpoint_ids:
        return {}
    # One grouped query over the (endpoint, status, created_at) index.
    rows = (
        Delivery.objects.filter(
            endpoint_id__in=endpoint_ids, status__in=Delivery.Status.UNFINISHED
        )
        .values("endpoint_id")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return {row["endpoint_id"]: row["n"] for row in rows}


def breakers_not_closed() -> list[HeldEndpoint]:
    """Open and half-open breakers of active endpoints, longest open first."""
    healths = list(
        EndpointHealth.objects.exclude(breaker_state=EndpointHealth.State.CLOSED)
        .filter(endpoint__is_active=True)
        .select_related("endpoint")
        .order_by("opened_at", "endpoint_id")
    )
    held = _held_counts([h.endpoint_id for h in healths])
    return [
        HeldEndpoint(
            endpoint_id=h.endpoint_id,
            url=h.endpoint.url,
            state=h.breaker_state,
            since=h.opened_at,
            reason=h.breaker_reason,
            next_probe_at=h.next_probe_at,
            held=held.get(h.endpoint_id, 0),
        )
        for h in healths
    ]


def _disabled() -> QuerySet[Endpoint]:
    """Disabled endpoints; an ended listen session is not one to worry about
    (it ends by design, deliveries/pull/sessions.py)."""
    return Endpoint.objects.filter(is_active=False).exclude(listen_session=True)


def endpoints_disabled_since(since: datetime) -> list[HeldEndpoint]:
    endpoints = list(
        _disabled().filter(disabled_at__gte=since).order_by("-disabled_at", "pk")
    )
    held = _held_counts([e.pk for e in endpoints])
    return [
        HeldEndpoint(
            endpoint_id=e.pk,
            url=e.url,
            state="disabled",
            since=e.disabled_at,
            reason=e.disabled_reason,
            next_probe_at=None,
            held=held.get(e.pk, 0),
        )
        for e in endpoints
    ]


def breakers_open_count() -> int:
    return (
        EndpointHealth.objects.exclude(breaker_state=EndpointHealth.State.CLOSED)
        .filter(endpoint__is_active=True)
        .count()
    )


def endpoints_disabled_count() -> int:
    return _disabled().count()


def dispatchers(*, now: datetime) -> tuple[list, list]:
    """(alive, stale) heartbeat rows; stale ones stopped beating
    DISPATCHER_DEAD_AFTER_SECONDS ago (declared dead, or not yet judged)."""
    limit = now - timedelta(seconds=settings.DISPATCHER_DEAD_AFTER_SECONDS)
    rows = list(DispatcherHeartbeat.objects.all())
    alive = [r for r in rows if r.last_seen_at >= limit]
    stale = [r for r in rows if r.last_seen_at < limit]
    return alive, stale


def declared_dead(row: DispatcherHeartbeat) -> bool:
    """Declared dead, and has not beaten since."""
    return row.declared_dead_at is not None and row.declared_dead_at >= row.last_seen_at


def dispatcher_state(row: DispatcherHeartbeat, *, now: datetime) -> str:
    """One line for people: alive, stopped heartbeating, or declared dead."""
    released = (
        "1 delivery released"
        if row.released == 1
        else f"{row.released} deliveries released"
    )
    if declared_dead(row):
        return f"declared dead at {when(row.declared_dead_at, now=now)}; {released}"
    limit = now - timedelta(seconds=settings.DISPATCHER_DEAD_AFTER_SECONDS)
    if row.last_seen_at < limit:
        return "stopped heartbeating"
    if row.declared_dead_at is not None:
        return (
            f"alive; was declared dead at {when(row.declared_dead_at, now=now)}"
            f" and came back ({released})"
        )
    return "alive"


def dispatcher_rescue_totals() -> tuple[int, int]:
    """(dispatchers declared dead, deliveries released from them), all time."""
    totals = counters.counter_totals()
    return (
        int(totals.get((counters.DISPATCHERS_DEAD, ""), 0)),
        int(totals.get((counters.DEAD_DISPATCHER_RELEASED, ""), 0)),
    )


def _rows(n: int) -> str:
    return f"{n} delivery held" if n == 1 else f"{n} deliveries held"


# --- the checks ---------------------------------------------------------------


def check_breakers(summary: PipelineSummary) -> list[Alert]:
    now = summary.now
    alerts = []
    for b in breakers_not_closed():
        since = f" since {when(b.since, now=now)}" if b.since else ""
        why = endpoint_words.pause_why(b.reason)
        if b.state != EndpointHealth.State.OPEN:
            state = "paused, a test delivery is deciding whether sending resumes"
            probe = ""
        elif b.next_probe_at is not None:
            state, probe = "paused", f"; next try at {when(b.next_probe_at, now=now)}"
        else:
            state, probe = "paused", ""
        alerts.append(
            Alert(
                "breaker_open",
                f"Endpoint {b.endpoint_id} ({b.url}) {state}{since}{why}: "
                f"{_rows(b.held)}{probe}.",
            )
        )
    return alerts


def check_disabled(summary: PipelineSummary) -> list[Alert]:
    now = summary.now
    return [
        Alert(
            "endpoint_disabled",
            f"Endpoint {d.endpoint_id} ({d.url}) was disabled at "
            f"{when(d.since, now=now)}{f' ({d.reason})' if d.reason else ''}: "
            f"{_rows(d.held)} until it is enabled.",
        )
        for d in endpoints_disabled_since(now - DAY)
    ]


def check_oldest_pending(summary: PipelineSummary) -> list[Alert]:
    age = summary.oldest_pending_age_seconds
    if age is None or age <= OLDEST_PENDING_ALERT.total_seconds():
        return []
    return [
        Alert(
            "oldest_pending",
            f"Oldest pending delivery {summary.oldest_pending_id} has waited "
            f"{human_seconds(age)} (alert above 30 min): are the dispatchers running?",
        )
    ]


def check_dead_growing(summary: PipelineSummary) -> list[Alert]:
    if summary.dead_last_24h <= summary.dead_previous_24h:
        return []
    return [
        Alert(
            "dead_growing",
            f"Dead letters are growing: {summary.dead_last_24h} in the last 24 h "
            f"against {summary.dead_previous_24h} in the 24 h before.",
        )
    ]


def check_dispatchers(summary: PipelineSummary) -> list[Alert]:
    now = summary.now
    _, stale = dispatchers(now=now)
    alerts = []
    for d in stale:
        if declared_dead(d):
            if not d.released:
                held = "it held no delivery"
            elif d.released == 1:
                held = "the 1 delivery it held went to the other dispatchers"
            else:
                held = (
                    f"the {d.released} deliveries it held went to the other dispatchers"
                )
            alerts.append(
                Alert(
                    "dispatcher_dead",
                    f"Dispatcher {d.worker_id} was declared dead at "
                    f"{when(d.declared_dead_at, now=now)} (last seen "
                    f"{when(d.last_seen_at, now=now)}): {held}.",
                )
            )
        else:
            alerts.append(
                Alert(
                    "dispatcher_stale",
                    f"Dispatcher {d.worker_id} stopped heartbeating: last seen "
                    f"{when(d.last_seen_at, now=now)}.",
                )
            )
    return alerts


def check_slow(summary: PipelineSummary) -> list[Alert]:
    return [
        Alert(
            "slow_endpoint",
            f"Endpoint {s.endpoint_id} ({s.url}): receiver response time p95 is "
            f"{s.p95_ms:.0f} ms, "
            f"over the {breaker.SLOW_P95_MS} ms threshold.",
        )
        for s in summary.slow_endpoints
    ]


def check_failing(summary: PipelineSummary) -> list[Alert]:
    """The operational endpoints' own health (loud), and endpoints failing with
    a closed breaker (deliveries.notifications)."""
    return failure_alerts(now=summary.now)


DEGRADED_LINES = 20  # endpoints named; each costs one grouped query


def check_degraded(summary: PipelineSummary) -> list[Alert]:
    """Active endpoints whose 24 h success rate is under DEGRADED_SUCCESS_RATE,
    with their failures broken down by kind and status."""
    below = settings.DEGRADED_SUCCESS_RATE
    healths = (
        EndpointHealth.objects.filter(
            endpoint__is_active=True,
            success_rate__lt=below,
            sample_count__gte=endpoint_words.DEGRADED_MIN_SAMPLES,
        )
        .select_related("endpoint__merchant")
        .order_by("success_rate", "endpoint_id")[:DEGRADED_LINES]
    )
    alerts = []
    for h in healths:
        failures = (
            Attempt.objects.filter(
                endpoint_id=h.endpoint_id, started_at__gte=summary.now - DAY
            )
            .exclude(outcome=Attempt.Outcome.SUCCEEDED)
            .values_list("error_kind", "status_code")
            .annotate(n=Count("pk"))
            .order_by("-n", "error_kind", "status_code")[:5]
        )
        kinds = ", ".join(
            f"{error_words(error_kind=k, error_message='', status_code=s) or k} x{n}"
            for k, s, n in failures
        )
        alerts.append(
            Alert(
                "endpoint_degraded",
                f"Endpoint {h.endpoint_id} ({h.endpoint.url}) of "
                f"{h.endpoint.merchant.slug}: "
                f"{endpoint_words.degraded_words(h, below=below)}"
                f"{'; failures: ' + kinds if kinds else ''}.",
            )
        )
    return alerts


CHECKS: list[Callable[[PipelineSummary], list[Alert]]] = [
    check_failing,
    check_oldest_pending,
    check_dead_growing,
    check_breakers,
    check_disabled,
    check_dispatchers,
    check_slow,
    check_degraded,
]


def pipeline_alerts(summary: PipelineSummary) -> list[Alert]:
    return [alert for check in CHECKS for alert in check(summary)]


def pipeline_summary(*, now: datetime) -> PipelineSummary:
    """The numbers of contract section 7, with a line per alert."""
    summary = pipeline_counts(now=now)
    return replace(summary, alerts=pipeline_alerts(summary))
