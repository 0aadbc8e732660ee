"""Rolling 24 h latency percentiles and success rate per endpoint.

PostgreSQL computes them with percentile_cont; elsewhere the same linear
interpolation runs in Python, so both backends give the same numbers.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from deliveries.models import Attempt
from endpoints import breaker
from endpoints.models import EndpointHealth

WINDOW = timedelta(hours=24)
QUANTILES = (0.5, 0.95, 0.99)

# One sort per endpoint for the three percentiles (an array of fractions),
# where three percentile_cont calls sorted each group three times.
_PG_SQL = """
SELECT endpoint_id,
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY response_ms),
       count(*),
       avg(CASE WHEN outcome = 'succeeded' THEN 1.0 ELSE 0.0 END)
FROM deliveries_attempt
WHERE started_at >= %s AND response_ms IS NOT NULL
GROUP BY endpoint_id
"""

# Every health row in one statement: bulk_update's CASE per row and field
# cost more Python than the statistics cost SQL (50 endpoints, 8 fields).
_PG_UPDATE = """
UPDATE endpoints_endpointhealth h
SET p50_ms = v.p50, p95_ms = v.p95, p99_ms = v.p99, sample_count = v.n,
    success_rate = v.rate, is_slow = v.slow, failure_threshold = v.threshold,
    stats_refreshed_at = %s
FROM unnest(%s::text[], %s::float8[], %s::float8[], %s::float8[], %s::int[],
            %s::float8[], %s::bool[], %s::int[])
     AS v(id, p50, p95, p99, n, rate, slow, threshold)
WHERE h.endpoint_id = v.id
"""
STAT_FIELDS = (
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "sample_count",
    "success_rate",
    "is_slow",
    "failure_threshold",
)


def percentile_cont(sorted_values: list[float], q: float) -> float:
    """PostgreSQL's percentile_cont: linear interpolation between closest ranks."""
    if not sorted_values:
        raise ValueError("no values")
    position = q * (len(sorted_values) - 1)
    lower = int(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    fraction = position - lower
    return (
        sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * fraction
    )


def endpoint_latency(
    *, since: datetime
) -> dict[str, tuple[float, float, float, int, float]]:
    """endpoint id -> (p50, p95, p99, samples, success rate) over attempts since `since`."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_PG_SQL, [since])
            return {
                row[0]: tuple(float(v) for v in row[1]) + (row[2], float(row[3]))
                for row in cursor.fetchall()
            }
    samples: dict[str, list[float]] = defaultdict(list)
    successes: dict[str, int] = defaultdict(int)
    rows = Attempt.objects.filter(
        started_at__gte=since, response_ms__isnull=False
    ).values_list("endpoint_id", "response_ms", "outcome")
    for endpoint_id, ms, outcome in rows.iterator(chunk_size=5000):
        samples[endpoint_id].append(ms)
        successes[endpoint_id] += outcome == Attempt.Outcome.SUCCEEDED
    result = {}
    for endpoint_id, values in samples.items():
        values.sort()
        p50, p95, p99 = (percentile_cont(values, q) for q in QUANTILES)
        result[endpoint_id] = (
            p50,
            p95,
            p99,
            len(values),
            successes[endpoint_id] / len(values),
        )
    return result


def endpoint_stats_refresh(*, now: datetime) -> int:
    """Write the 24 h statistics and the slow-endpoint threshold rule to every health row."""
    latency = endpoint_latency(since=now - WINDOW)
    base = settings.BREAKER_FAILURE_THRESHOLD
    rows = []
    for pk in EndpointHealth.objects.values_list("pk", flat=True):
        p50, p95, p99, count, rate = latency.get(pk, (None, None, None, 0, None))
        slow = breaker.is_slow(p95_ms=p95, samples=count)
        threshold = breaker.effective_threshold(
            base_threshold=base, p95_ms=p95, samples=count
        )
        rows.append((pk, p50, p95, p99, count, rate, slow, threshold))
    if not rows:
        return 0
    if connection.vendor == "postgresql":
        columns = [list(column) for column in zip(*rows, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(_PG_UPDATE, [now, *columns])
        return len(rows)
    healths = [
        EndpointHealth(
            endpoint_id=pk,
            stats_refreshed_at=now,
            **dict(zip(STAT_FIELDS, values, strict=True)),
        )
        for pk, *values in rows
    ]
    with transaction.atomic():
        EndpointHealth.objects.bulk_update(
            healths, [*STAT_FIELDS, "stats_refreshed_at"], batch_size=500
        )
    return len(healths)
