"""The pipeline in numbers, for the staff console, relay_status and /metrics.

Queue depth, the oldest due row, slow endpoints, dead letters by endpoint and
the per-minute series. The alerts read these numbers (deliveries.ops.alerts,
which also puts the two together as `pipeline_summary`); the Alert type lives
here, beside the summary that carries them, so the readers of alerts below
deliveries.ops.alerts (deliveries.notifications) need not import it.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncMinute

from deliveries.models import Delivery
from endpoints import breaker
from endpoints.models import Endpoint, EndpointHealth

# Every query below is backed by an index of Delivery (see its Meta): the due
# index for pending rows, the partial dead_at and succeeded_at indexes for
# the time windows, so the numbers stay cheap on tables of millions of rows.


@dataclass(frozen=True)
class Alert:
    kind: str  # e.g. "breaker_open": stable, for scripts reading --json
    text: str  # one line for people

    def __str__(self) -> str:
        return self.text


HOUR = timedelta(hours=1)
DAY = timedelta(hours=24)
WINDOWS = {"1h": HOUR, "24h": DAY, "7d": timedelta(days=7)}


@dataclass(frozen=True)
class SlowEndpoint:
    endpoint_id: str
    url: str
    merchant: str
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    sample_count: int
    success_rate: float | None
    breaker_state: str


@dataclass(frozen=True)
class PipelineSummary:
    now: datetime
    pending: int  # due now, and a dispatcher may claim it
    held: int  # due, but its merchant or endpoint is off or its breaker not closed
    awaiting_retry: int  # pending, due later (backoff)
    in_flight: int  # delivering, under a lease
    dead: int
    delivered_last_hour: int
    failed_last_hour: int  # went dead in the last hour
    oldest_pending_id: str | None
    oldest_pending_age_seconds: float | None
    avg_latency_seconds_last_hour: float | None  # created -> succeeded
    dead_last_24h: int
    dead_previous_24h: int
    waiting: int = 0  # behind the head of an ordered lane (deliveries/lanes.py)
    slow_endpoints: list[SlowEndpoint] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)


@dataclass(frozen=True)
class DeadLetterGroup:
    endpoint_id: str
    url: str
    merchant: str
    is_active: bool
    count: int
    top_error: str
    top_error_count: int
    top_status_code: int | None
    top_status_count: int
    first_dead_at: datetime
    last_dead_at: datetime
    avg_attempts: float


_CLAIMABLE = Q(endpoint__is_active=True, merchant__is_active=True) & (
    Q(endpoint__health__breaker_state=EndpointHealth.State.CLOSED)
    | Q(endpoint__health__isnull=True)
)


def queue_depth(*, now: datetime) -> dict[str, int]:
    """pending (due now and claimable), held (due, but behind a switched-off
    merchant, a disabled endpoint or a breaker that is not closed),
    awaiting_retry, delivering, dead and waiting (behind the head of an
    ordered lane) row counts."""
    # Totals per status come from (status, id) and the partial dead_at index
    # without reading a row; only "due now" reads rows, from the due index,
    # and due rows are few while dispatchers keep up (a backlog is the alert).
    by_status = dict(
        Delivery.objects.filter(status__in=Delivery.Status.UNFINISHED)
        .values_list("status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    due = Delivery.objects.filter(
        status=Delivery.Status.PENDING, next_attempt_at__lte=now
    ).aggregate(
        all=Count("pk"),
        # What a dispatcher may claim now: the claim skips switched-off
        # merchants, disabled endpoints and breakers that are not closed
        # (dispatch/claim_sql.py), so rows behind them are held, not due.
        claimable=Count("pk", filter=_CLAIMABLE),
    )
    pending = by_status.get(Delivery.Status.PENDING, 0)
    return {
        "pending": due["claimable"],
        "held": due["all"] - due["claimable"],
        "awaiting_retry": max(0, pending - due["all"]),  # two reads, not one snapshot
        "delivering": by_status.get(Delivery.Status.DELIVERING, 0),
        "dead": Delivery.objects.filter(status=Delivery.Status.DEAD).count(),
        # From the lanes' partial index (deliveries/lanes.py): empty without
        # ordered endpoints.
        "waiting": Delivery.objects.filter(status=Delivery.Status.WAITING).count(),
    }


def oldest_pending(*, now: datetime) -> tuple[str | None, float | None]:
    """The due pending delivery that has waited longest, and for how many seconds.

    Age counts from when it became due, so a delivery in backoff is not "late";
    rows held back by a disabled endpoint or a breaker are left out.
    """
    row = (
        Delivery.objects.filter(
            status=Delivery.Status.PENDING, next_attempt_at__lte=now
        )
        # Rows held by a disabled endpoint or a breaker are not waiting for a
        # dispatcher: their own alerts name them (deliveries.ops.alerts).
        .filter(_CLAIMABLE)
        .order_by("next_attempt_at")
        .values_list("pk", "next_attempt_at")
        .first()
    )
    if row is None:
        return None, None
    return row[0], max(0.0, (now - row[1]).total_seconds())


def slow_endpoints() -> list[SlowEndpoint]:
    """Endpoints whose 24 h p95 is over the slow threshold, slowest first."""
    healths = (
        EndpointHealth.objects.filter(
            p95_ms__gt=breaker.SLOW_P95_MS, sample_count__gte=breaker.MIN_SAMPLES
        )
        .select_related("endpoint__merchant")
        .order_by("-p95_ms")
    )
    return [
        SlowEndpoint(
            endpoint_id=h.endpoint_id,
            url=h.endpoint.url,
            merchant=h.endpoint.merchant.slug,
            p50_ms=h.p50_ms,
            p95_ms=h.p95_ms,
            p99_ms=h.p99_ms,
            sample_count=h.sample_count,
            success_rate=h.success_rate,
            breaker_state=h.breaker_state,
        )
        for h in healths
    ]


def _delivered(*, since: datetime, until: datetime) -> tuple[int, float | None]:
    """Deliveries that succeeded in [since, until), and their average latency."""
    # Summed in Python from two timestamps: a datetime difference averaged in
    # SQL comes back as an interval on PostgreSQL and as text on SQLite.
    rows = Delivery.objects.filter(
        status=Delivery.Status.SUCCEEDED,
        succeeded_at__gte=since,
        succeeded_at__lt=until,
    ).values_list("created_at", "succeeded_at")
    total, count = 0.0, 0
    for created, succeeded in rows.iterator(chunk_size=5000):
        total += (succeeded - created).total_seconds()
        count += 1
    return count, (total / count if count else None)


def _dead_windows(*, now: datetime) -> dict[str, int]:
    """Dead letters of the last hour, last 24 h and the 24 h before, in one query."""

    def died(since: datetime, until: datetime) -> Count:
        return Count("pk", filter=Q(dead_at__gte=since, dead_at__lt=until))

    # One range of the partial dead_at index covers all three windows.
    return Delivery.objects.filter(
        status=Delivery.Status.DEAD, dead_at__gte=now - 2 * DAY, dead_at__lt=now
    ).aggregate(
        hour=died(now - HOUR, now),
        day=died(now - DAY, now),
        previous_day=died(now - 2 * DAY, now - DAY),
    )


def pipeline_counts(*, now: datetime) -> PipelineSummary:
    """The numbers of contract section 7; deliveries.ops.alerts.pipeline_summary
    adds a line per alert."""
    depth = queue_depth(now=now)
    oldest_id, oldest_age = oldest_pending(now=now)
    dead = _dead_windows(now=now)
    delivered, avg_latency = _delivered(since=now - HOUR, until=now)
    return PipelineSummary(
        now=now,
        pending=depth["pending"],
        held=depth["held"],
        awaiting_retry=depth["awaiting_retry"],
        in_flight=depth["delivering"],
        dead=depth["dead"],
        delivered_last_hour=delivered,
        failed_last_hour=dead["hour"],
        oldest_pending_id=oldest_id,
        oldest_pending_age_seconds=oldest_age,
        avg_latency_seconds_last_hour=avg_latency,
        dead_last_24h=dead["day"],
        dead_previous_24h=dead["previous_day"],
        waiting=depth["waiting"],
        slow_endpoints=slow_endpoints(),
    )


def _top(tally: Tally) -> tuple[object, int]:
    if not tally:
        return None, 0
    # Ties go to the smallest value so the answer does not depend on row order.
    value, count = min(tally.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return value, count


def dead_letter_analysis(
    *, since: datetime, until: datetime, endpoint_id: str | None = None
) -> list[DeadLetterGroup]:
    """Dead letters per endpoint that died in [since, until), biggest group first."""
    dead = Delivery.objects.filter(
        status=Delivery.Status.DEAD, dead_at__gte=since, dead_at__lt=until
    )
    if endpoint_id is not None:
        dead = dead.filter(endpoint_id=endpoint_id)
    # One pass over the window (the partial dead_at index), grouped finely;
    # the per-endpoint totals, top error and top status are summed up here.
    # The triples are few: last_error is an error kind or "http 503"
    # (deliveries.dispatch.outcomes), not a text per row.
    rows = (
        dead.values("endpoint_id", "last_error", "last_status_code")
        .annotate(
            n=Count("pk"),
            first=Min("dead_at"),
            last=Max("dead_at"),
            attempts=Sum(F("attempt_count") - F("budget_start")),
        )
        .order_by()
    )
    groups: dict[str, dict] = {}
    errors: dict[str, Tally] = defaultdict(Tally)
    codes: dict[str, Tally] = defaultdict(Tally)
    for row in rows:
        key = row["endpoint_id"]
        g = groups.get(key)
        if g is None:
            groups[key] = dict(row)
        else:
            g["n"] += row["n"]
            g["attempts"] += row["attempts"]
            g["first"] = min(g["first"], row["first"])
            g["last"] = max(g["last"], row["last"])
        errors[key][row["last_error"]] += row["n"]
        codes[key][row["last_status_code"]] += row["n"]
    groups = list(groups.values())
    endpoints = Endpoint.objects.select_related("merchant").in_bulk(
        [g["endpoint_id"] for g in groups]
    )
    result = []
    for g in groups:
        endpoint = endpoints[g["endpoint_id"]]
        error, error_n = _top(errors[g["endpoint_id"]])
        code, code_n = _top(codes[g["endpoint_id"]])
        result.append(
            DeadLetterGroup(
                endpoint_id=endpoint.pk,
                url=endpoint.url,
                merchant=endpoint.merchant.slug,
                is_active=endpoint.is_active,
                count=g["n"],
                top_error=error or "",
                top_error_count=error_n,
                top_status_code=code,
                top_status_count=code_n,
                first_dead_at=g["first"],
                last_dead_at=g["last"],
                avg_attempts=g["attempts"] / g["n"],
            )
        )
    result.sort(key=lambda r: (-r.count, r.endpoint_id))
    return result


def minute_series(
    *, now: datetime, minutes: int = 60
) -> list[tuple[datetime, int, int]]:
    """(minute, delivered, failed) for each of the last `minutes` minutes, oldest first."""
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - timedelta(minutes=minutes)
    delivered = _per_minute(
        Delivery.objects.filter(
            status=Delivery.Status.SUCCEEDED,
            succeeded_at__gte=start,
            succeeded_at__lt=end,
        ),
        "succeeded_at",
    )
    failed = _per_minute(
        Delivery.objects.filter(
            status=Delivery.Status.DEAD, dead_at__gte=start, dead_at__lt=end
        ),
        "dead_at",
    )
    slots = [start + timedelta(minutes=i) for i in range(minutes)]
    return [(m, delivered.get(m, 0), failed.get(m, 0)) for m in slots]


def _per_minute(queryset: QuerySet[Delivery], field_name: str) -> dict[datetime, int]:
    rows = (
        queryset.annotate(minute=TruncMinute(field_name))
        .values("minute")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return {row["minute"]: row["n"] for row in rows}
