"""The gauges of /metrics that count rows, computed by a dispatcher, read by /metrics.

Counting deliveries by state and finding the oldest due one read the
deliveries table (about 0.4 s of database time at 500 k rows), so a scrape
must not do it: one dispatcher at a time computes them every few seconds
(deliveries.dispatch.maintenance.GaugeRefresher) and stores them as one
AnalysisSnapshot row, which /metrics reads by primary key and exports with
its age. With no dispatcher running the figures stop moving and their age
grows, which is the truth: nobody is counting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from deliveries.models import AnalysisSnapshot
from deliveries.ops import alerts, summary

SNAPSHOT = "queue_gauges"  # its AnalysisSnapshot row
REFRESH_EVERY = timedelta(seconds=5)


@dataclass(frozen=True)
class QueueGauges:
    """The row-counting gauges as of one moment (`computed_at` of their row)."""

    # pending, held, awaiting_retry, delivering, dead, waiting
    queue_depth: dict[str, int]
    oldest_pending_seconds: float  # 0 when nothing is due
    breakers_open: int
    endpoints_disabled: int

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> QueueGauges:
        return cls(
            queue_depth={str(k): int(v) for k, v in data["queue_depth"].items()},
            oldest_pending_seconds=float(data["oldest_pending_seconds"]),
            breakers_open=int(data["breakers_open"]),
            endpoints_disabled=int(data["endpoints_disabled"]),
        )


def queue_gauges_compute(*, now: datetime) -> QueueGauges:
    _, age = summary.oldest_pending(now=now)
    return QueueGauges(
        queue_depth=summary.queue_depth(now=now),
        oldest_pending_seconds=age or 0.0,
        breakers_open=alerts.breakers_open_count(),
        endpoints_disabled=alerts.endpoints_disabled_count(),
    )


def queue_gauges_refresh(*, now: datetime) -> QueueGauges:
    """Compute the gauges now and store them as the row /metrics reads."""
    gauges = queue_gauges_compute(now=now)
    # An upsert: two dispatchers (or a command) may store it at once.
    AnalysisSnapshot.objects.bulk_create(
        [AnalysisSnapshot(name=SNAPSHOT, computed_at=now, data=gauges.to_json())],
        update_conflicts=True,
        unique_fields=["name"],
        update_fields=["computed_at", "data"],
    )
    return gauges


def queue_gauges_due(*, now: datetime, every: timedelta = REFRESH_EVERY) -> bool:
    """True unless the stored gauges were computed less than `every` ago.

    A row stamped in the future (a dispatcher whose clock runs ahead) counts
    as due, so one fast clock cannot stop the others from refreshing.
    """
    return not AnalysisSnapshot.objects.filter(
        name=SNAPSHOT, computed_at__gt=now - every, computed_at__lte=now
    ).exists()


def queue_gauges_stored() -> tuple[QueueGauges, datetime] | None:
    """The stored gauges and when they were computed; None if never (one
    primary-key read)."""
    row = (
        AnalysisSnapshot.objects.filter(name=SNAPSHOT)
        .values_list("data", "computed_at")
        .first()
    )
    if row is None:
        return None
    try:
        return QueueGauges.from_json(row[0]), row[1]
    except (KeyError, TypeError, ValueError):
        # Written by another version mid-deploy: unknown, not zero.
        return None
