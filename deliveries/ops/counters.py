"""Counters behind /metrics, kept in the database so every process adds up.

A process-local prometheus_client counter would be lost on restart and could
not be summed across hosts; rows sharded by process can.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Iterable
from dataclasses import dataclass

from deliveries.models import Counter
from relayproject.lib import dbfeatures

DELIVERIES = "deliveries_total"  # label: outcome (succeeded, dead)
ATTEMPTS = "attempts_total"  # label: result (succeeded, retry, dead, gone)
RECLAIMED = "reclaimed_total"
REPLAYED = "replayed_total"
DISPATCHERS_DEAD = "dispatchers_dead_total"  # dispatchers declared dead (rescue)
DEAD_DISPATCHER_RELEASED = "dead_dispatcher_released_total"  # rows released from them


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram kept as counter series: _sum, _count, _bucket{le}."""

    name: str
    help: str
    buckets: tuple[float, ...]

    def __post_init__(self) -> None:
        # Every observation of every delivery adds to these: their keys are
        # made once, not formatted again per bucket per observation.
        labels = [*(str(bound) for bound in self.buckets), "+Inf"]
        set_once = object.__setattr__  # the dataclass is frozen
        set_once(self, "_sum_key", (f"{self.name}_sum", ""))
        set_once(self, "_count_key", (f"{self.name}_count", ""))
        set_once(
            self,
            "_bucket_keys",
            tuple((f"{self.name}_bucket", label) for label in labels),
        )

    def observe(self, tally: Tally, seconds: float) -> None:
        """Add one observation to a tally (cumulative buckets, as Prometheus has them)."""
        self.observe_many(tally, (seconds,))

    def observe_many(self, tally: Tally, observations: Iterable[float]) -> None:
        """observe() each one, each bucket added to once: a flush of 200
        attempts into 13 cumulative buckets was thousands of additions."""
        below = [0] * len(self._bucket_keys)  # observations whose first bucket it is
        for seconds in observations:
            tally[self._sum_key] += seconds
            below[bisect_left(self.buckets, seconds)] += 1
        count = 0
        # Every bucket whose bound is >= an observation, and +Inf, counts it.
        for key, first_here in zip(self._bucket_keys, below, strict=True):
            count += first_here
            if count:
                tally[key] += count
        if count:
            tally[self._count_key] += count


ATTEMPT_DURATION = Histogram(
    "attempt_duration_seconds",
    "Duration of HTTP attempts.",
    (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
# From publish (the event's created_at) to a delivery's first attempt and to
# its success: what the merchant feels, queueing and retries included.
_WAIT_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
    21600.0,
    86400.0,
)
PUBLISH_TO_FIRST_ATTEMPT = Histogram(
    "publish_to_first_attempt_seconds",
    "Seconds from publish to a delivery's first attempt.",
    _WAIT_BUCKETS,
)
PUBLISH_TO_SUCCESS = Histogram(
    "publish_to_success_seconds",
    "Seconds from publish to a delivery's success, retries included.",
    _WAIT_BUCKETS,
)
HISTOGRAMS = (ATTEMPT_DURATION, PUBLISH_TO_FIRST_ATTEMPT, PUBLISH_TO_SUCCESS)


def counters_add(*, shard: str, tally: Tally) -> None:
    """Add a tally of (name, label) -> amount to this shard's rows, in one statement."""
    from django.db import connection

    # Sorted: two transactions adding to one shard's rows lock them in the
    # same order, so neither can hold one row while waiting for the other's.
    rows = sorted((n, lab, float(a)) for (n, lab), a in tally.items() if a)
    if not rows:
        return
    table = Counter._meta.db_table
    upsert = (
        f"ON CONFLICT (shard, name, label) DO UPDATE "
        f"SET value = {table}.value + EXCLUDED.value"
    )
    if dbfeatures.batch_statements():
        # One text whatever the number of series (a flush's histogram buckets
        # vary): psycopg converts it once, not per flush.
        names, labels, amounts = (list(c) for c in zip(*rows, strict=True))
        sql = (
            f"INSERT INTO {table} (shard, name, label, value) "
            "SELECT %s::text, * FROM unnest(%s::text[], %s::text[], %s::float8[]) "
            + upsert
        )
        params = [shard, names, labels, amounts]
    else:
        values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
        sql = (
            f"INSERT INTO {table} (shard, name, label, value) VALUES {values} " + upsert
        )
        params = [x for row in rows for x in (shard, *row)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def counter_totals() -> dict[tuple[str, str], float]:
    """Every series summed over all shards."""
    from django.db.models import Sum

    rows = Counter.objects.values("name", "label").annotate(total=Sum("value"))
    return {(r["name"], r["label"]): r["total"] for r in rows}
