"""Counters behind /metrics, kept in the database so every process adds up.

A process-local prometheus_client counter would be lost on restart and could
not be summed across hosts; rows sharded by process can.
"""

from __future__ import annotations

from collections import Counter as Tally

from deliveries.models import Counter

DELIVERIES = "deliveries_total"  # label: outcome (succeeded, dead)
ATTEMPTS = "attempts_total"  # label: result (succeeded, retry, dead, gone)
RECLAIMED = "reclaimed_total"
REPLAYED = "replayed_total"
DURATION_SUM = "attempt_duration_seconds_sum"
DURATION_COUNT = "attempt_duration_seconds_count"
DURATION_BUCKET = "attempt_duration_seconds_bucket"  # label: le
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def observe_duration(tally: Tally, seconds: float) -> None:
    """Add one attempt duration to a tally, Prometheus-style (cumulative buckets)."""
    tally[(DURATION_SUM, "")] += seconds
    tally[(DURATION_COUNT, "")] += 1
    for bound in DURATION_BUCKETS:
        if seconds <= bound:
            tally[(DURATION_BUCKET, str(bound))] += 1
    tally[(DURATION_BUCKET, "+Inf")] += 1


def counters_add(*, shard: str, tally: Tally) -> None:
    """Add a tally of (name, label) -> amount to this shard's rows, in one statement."""
    from django.db import connection

    rows = [(shard, n, lab, float(a)) for (n, lab), a in tally.items() if a]
    if not rows:
        return
    table = Counter._meta.db_table
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (shard, name, label, value) VALUES {values} "
            f"ON CONFLICT (shard, name, label) DO UPDATE "
            f"SET value = {table}.value + EXCLUDED.value",
            [x for row in rows for x in row],
        )


def counter_totals() -> dict[tuple[str, str], float]:
    """Every series summed over all shards."""
    from django.db.models import Sum

    rows = Counter.objects.values("name", "label").annotate(total=Sum("value"))
    return {(r["name"], r["label"]): r["total"] for r in rows}
