"""Publish-to-first-attempt and publish-to-success latency, p50/p95/p99 over 24 h.

"Why did merchant X get order 42 three minutes late?" starts here: how long
deliveries wait before their first try, and before they land, per endpoint
and for the whole pipeline. Deliveries published in the window count; a
delivery's publish time is its created_at (the event's), its first attempt is
attempt number 1, its success is succeeded_at. One query on PostgreSQL
(percentile_cont over GROUPING SETS); the same arithmetic in Python elsewhere.

At a million deliveries that query reads a day of deliveries and their first
attempts (hundreds of ms), so the pages and relay_status read the last result
the dispatchers' maintenance stored (publish_latency_recent) and compute it
themselves only when none is fresh.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import OuterRef, Subquery

from deliveries.models import AnalysisSnapshot, Attempt, Delivery
from deliveries.ops.held import human_seconds
from deliveries.ops.stats import QUANTILES, percentile_cont
from relayproject.lib import citus, dbfeatures

WINDOW = timedelta(hours=24)
PIPELINE = ""  # the key of the whole-pipeline row
SNAPSHOT = "publish_latency"  # its AnalysisSnapshot row
# The maintenance step refreshes the snapshot every minute; older than this,
# a page recomputes it (no dispatcher running, or all of them stuck).
SNAPSHOT_MAX_AGE = timedelta(minutes=5)


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p95: float
    p99: float
    samples: int


@dataclass(frozen=True)
class PublishLatency:
    """Seconds from publish, per endpoint id (PIPELINE for all of them)."""

    first_attempt: dict[str, Percentiles]
    success: dict[str, Percentiles]

    def pipeline(self) -> tuple[Percentiles | None, Percentiles | None]:
        return self.first_attempt.get(PIPELINE), self.success.get(PIPELINE)

    def to_json(self) -> dict:
        return {
            "first_attempt": {
                k: list(astuple(v)) for k, v in self.first_attempt.items()
            },
            "success": {k: list(astuple(v)) for k, v in self.success.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> PublishLatency:
        return cls(
            first_attempt={
                k: Percentiles(*v) for k, v in data["first_attempt"].items()
            },
            success={k: Percentiles(*v) for k, v in data["success"].items()},
        )


_PG_SQL = """
WITH waits AS (
    SELECT d.endpoint_id,
           extract(epoch FROM a.started_at - d.created_at) AS to_first,
           extract(epoch FROM d.succeeded_at - d.created_at) AS to_success
    FROM deliveries_delivery d
    -- A first attempt starts after its delivery was made, so the window
    -- bounds attempts too: an index range instead of a scan of every attempt.
    LEFT JOIN deliveries_attempt a
        ON a.delivery_id = d.id AND a.merchant_id = d.merchant_id
        AND a.number = 1 AND a.started_at >= %s
    WHERE d.created_at >= %s
)
SELECT coalesce(endpoint_id, ''),
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY to_first)
           FILTER (WHERE to_first IS NOT NULL),
       count(to_first),
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY to_success)
           FILTER (WHERE to_success IS NOT NULL),
       count(to_success)
FROM waits
GROUP BY GROUPING SETS ((endpoint_id), ())
"""


def publish_latency(*, now: datetime) -> PublishLatency:
    since = now - WINDOW
    if dbfeatures.percentiles_in_sql():
        return _from_postgres(since)
    return _in_python(since)


def publish_latency_refresh(*, now: datetime) -> PublishLatency:
    """Compute the latency now and store it as the snapshot pages read."""
    latency = publish_latency(now=now)
    # An upsert: a page and a dispatcher may both store it at once.
    AnalysisSnapshot.objects.bulk_create(
        [AnalysisSnapshot(name=SNAPSHOT, computed_at=now, data=latency.to_json())],
        update_conflicts=True,
        unique_fields=["name"],
        update_fields=["computed_at", "data"],
    )
    return latency


def publish_latency_recent(*, now: datetime) -> tuple[PublishLatency, datetime]:
    """The stored latency if it is at most SNAPSHOT_MAX_AGE old, else computed
    (and stored) now; with the time it was computed."""
    stored = AnalysisSnapshot.objects.filter(
        name=SNAPSHOT,
        computed_at__gte=now - SNAPSHOT_MAX_AGE,
        computed_at__lte=now,  # not from a clock ahead of this one
    ).first()
    if stored is not None:
        return PublishLatency.from_json(stored.data), stored.computed_at
    return publish_latency_refresh(now=now), now


def _from_postgres(since: datetime) -> PublishLatency:
    first: dict[str, Percentiles] = {}
    success: dict[str, Percentiles] = {}
    with connection.cursor() as cursor:
        # On Citus the waits are gathered from every shard first (a
        # materialized CTE is one intermediate result) and the percentiles
        # taken over all of them on the coordinator: exact, not per shard.
        sql = _PG_SQL.replace("WITH waits AS (", "WITH waits AS MATERIALIZED (")
        cursor.execute(sql if citus.on() else _PG_SQL, [since, since])
        for key, first_q, first_n, success_q, success_n in cursor.fetchall():
            if first_n:
                first[key] = Percentiles(*(float(v) for v in first_q), first_n)
            if success_n:
                success[key] = Percentiles(*(float(v) for v in success_q), success_n)
    return PublishLatency(first_attempt=first, success=success)


def _in_python(since: datetime) -> PublishLatency:
    first_at = Attempt.objects.filter(
        delivery=OuterRef("pk"), merchant_id=OuterRef("merchant_id"), number=1
    ).values("started_at")[:1]
    rows = (
        Delivery.objects.filter(created_at__gte=since)
        .annotate(first_at=Subquery(first_at))
        .values_list("endpoint_id", "created_at", "first_at", "succeeded_at")
    )
    to_first: dict[str, list[float]] = defaultdict(list)
    to_success: dict[str, list[float]] = defaultdict(list)
    for endpoint_id, created_at, first, succeeded_at in rows.iterator(chunk_size=5000):
        if first is not None:
            wait = (first - created_at).total_seconds()
            to_first[endpoint_id].append(wait)
            to_first[PIPELINE].append(wait)
        if succeeded_at is not None:
            wait = (succeeded_at - created_at).total_seconds()
            to_success[endpoint_id].append(wait)
            to_success[PIPELINE].append(wait)
    return PublishLatency(
        first_attempt=_percentiles(to_first), success=_percentiles(to_success)
    )


def _percentiles(samples: dict[str, list[float]]) -> dict[str, Percentiles]:
    result = {}
    for key, values in samples.items():
        values.sort()
        result[key] = Percentiles(
            *(percentile_cont(values, q) for q in QUANTILES), len(values)
        )
    return result


def seconds_text(seconds: float | None) -> str:
    """Whole milliseconds under a second, else as staff read durations."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return human_seconds(seconds)  # "3.2 s", "21 min 0 s", "2 h 5 min"


@dataclass(frozen=True)
class LatencyRow:
    endpoint_id: str  # PIPELINE for the whole pipeline
    url: str
    first_attempt: Percentiles | None
    success: Percentiles | None

    @property
    def cells(self) -> list[str]:
        """p50/p95/p99 to first attempt, then to success, as text."""
        return [
            seconds_text(getattr(found, q) if found else None)
            for found in (self.first_attempt, self.success)
            for q in ("p50", "p95", "p99")
        ]

    @property
    def delivered(self) -> int:
        return self.success.samples if self.success else 0


def latency_rows(latency: PublishLatency, *, limit: int = 20) -> list[LatencyRow]:
    """The pipeline first, then the endpoints slowest to success (p99) first."""
    from endpoints.models import Endpoint

    keys = (set(latency.first_attempt) | set(latency.success)) - {PIPELINE}

    def slowness(key: str) -> float:
        found = latency.success.get(key) or latency.first_attempt.get(key)
        return found.p99 if found else 0.0

    chosen = sorted(keys, key=slowness, reverse=True)[:limit]
    urls = dict(Endpoint.objects.filter(pk__in=chosen).values_list("id", "url"))
    rows = (
        [LatencyRow(PIPELINE, "", *latency.pipeline())]
        if latency.first_attempt or latency.success
        else []
    )
    rows += [
        LatencyRow(
            key,
            urls.get(key, ""),
            latency.first_attempt.get(key),
            latency.success.get(key),
        )
        for key in chosen
    ]
    return rows
