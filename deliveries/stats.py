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

_PG_SQL = """
SELECT endpoint_id,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY response_ms),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY response_ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY response_ms),
       count(*),
       avg(CASE WHEN outcome = 'succeeded' THEN 1.0 ELSE 0.0 END)
FROM deliveries_attempt
WHERE started_at >= %s AND response_ms IS NOT NULL
GROUP BY endpoint_id
"""


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
                row[0]: tuple(float(v) for v in row[1:4]) + (row[4], float(row[5]))
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
    healths = list(EndpointHealth.objects.all())
    for health in healths:
        p50, p95, p99, count, rate = latency.get(health.pk, (None, None, None, 0, None))
        health.p50_ms, health.p95_ms, health.p99_ms = p50, p95, p99
        health.sample_count = count
        health.success_rate = rate
        health.is_slow = breaker.is_slow(p95_ms=p95, samples=count)
        health.failure_threshold = breaker.effective_threshold(
            base_threshold=base, p95_ms=p95, samples=count
        )
        health.stats_refreshed_at = now
    with transaction.atomic():
        EndpointHealth.objects.bulk_update(
            healths,
            [
                "p50_ms",
                "p95_ms",
                "p99_ms",
                "sample_count",
                "success_rate",
                "is_slow",
                "failure_threshold",
                "stats_refreshed_at",
            ],
            batch_size=500,
        )
    return len(healths)
