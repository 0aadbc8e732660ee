"""The rolling statistics of each endpoint's health row (the 24 h latency
percentiles, success rate, slowness and the threshold they set), written in
one statement per refresh. What they are is `deliveries.ops.stats`'s.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction

from endpoints.models import EndpointHealth
from relayproject.lib import dbfeatures

STAT_FIELDS = (
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "sample_count",
    "success_rate",
    "is_slow",
    "failure_threshold",
)

# Every health row in one statement: bulk_update's CASE per row and field
# cost more Python than the statistics cost SQL (50 endpoints, 8 fields).
_PG_STATS_UPDATE = f"""
UPDATE {EndpointHealth._meta.db_table} h
SET p50_ms = v.p50, p95_ms = v.p95, p99_ms = v.p99, sample_count = v.n,
    success_rate = v.rate, is_slow = v.slow, failure_threshold = v.threshold,
    stats_refreshed_at = %s
FROM unnest(%s::text[], %s::float8[], %s::float8[], %s::float8[], %s::int[],
            %s::float8[], %s::bool[], %s::int[])
     AS v(id, p50, p95, p99, n, rate, slow, threshold)
WHERE h.endpoint_id = v.id
"""


def stats_endpoint_ids() -> list[str]:
    return list(EndpointHealth.objects.values_list("pk", flat=True))


def stats_write(rows: list[tuple], *, now: datetime) -> int:
    """Write (endpoint, *STAT_FIELDS) rows; how many."""
    if not rows:
        return 0
    if dbfeatures.batch_statements():
        columns = [list(column) for column in zip(*rows, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(_PG_STATS_UPDATE, [now, *columns])
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
