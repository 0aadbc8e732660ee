"""Rolling 24 h latency percentiles and success rate per endpoint.

PostgreSQL computes them with percentile_cont; elsewhere the same linear
interpolation runs in Python, so both backends give the same numbers.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from deliveries.models import Attempt
from endpoints import breaker, health_stats
from relayproject.lib import dbfeatures

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
    if dbfeatures.percentiles_in_sql():
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
    for pk in health_stats.stats_endpoint_ids():
        p50, p95, p99, count, rate = latency.get(pk, (None, None, None, 0, None))
        slow = breaker.is_slow(p95_ms=p95, samples=count)
        threshold = breaker.effective_threshold(
            base_threshold=base, p95_ms=p95, samples=count
        )
        rows.append((pk, p50, p95, p99, count, rate, slow, threshold))
    return health_stats.stats_write(rows, now=now)
