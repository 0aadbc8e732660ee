"""/metrics: the series of contract section 7, read from the database at scrape time.

Gunicorn workers and dispatchers are separate processes, so nothing is kept
in process memory: queue depth and oldest pending are queried, and counters
are the sums of the shards every process writes (deliveries.dispatch.counters).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from deliveries import alerts, selectors
from deliveries.dispatch import counters
from relayproject.clock import utcnow

DELIVERY_OUTCOMES = ("succeeded", "dead")
ATTEMPT_RESULTS = ("succeeded", "retry", "dead", "gone")


def _labelled(
    totals: dict[tuple[str, str], float], name: str, known: tuple[str, ...]
) -> dict[str, float]:
    # Known labels always appear (at 0) so rate() has a series from the start.
    values = {label: 0.0 for label in known}
    for (series, label), value in totals.items():
        if series == name:
            values[label] = value
    return values


class RelayCollector(Collector):
    """Yields every relay_* family from one read of the database."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        totals = counters.counter_totals()

        deliveries = CounterMetricFamily(
            "relay_deliveries_total",
            "Deliveries that reached a final outcome.",
            labels=["outcome"],
        )
        for label, value in _labelled(
            totals, counters.DELIVERIES, DELIVERY_OUTCOMES
        ).items():
            deliveries.add_metric([label], value)
        yield deliveries

        attempts = CounterMetricFamily(
            "relay_attempts_total", "HTTP attempts by result.", labels=["result"]
        )
        for label, value in _labelled(
            totals, counters.ATTEMPTS, ATTEMPT_RESULTS
        ).items():
            attempts.add_metric([label], value)
        yield attempts

        yield CounterMetricFamily(
            "relay_reclaimed_total",
            "Deliveries taken over after their lease expired.",
            value=totals.get((counters.RECLAIMED, ""), 0.0),
        )
        yield CounterMetricFamily(
            "relay_replayed_total",
            "Deliveries replayed by staff or the API.",
            value=totals.get((counters.REPLAYED, ""), 0.0),
        )

        depth = GaugeMetricFamily(
            "relay_queue_depth",
            "Deliveries by state: pending (due now), awaiting_retry, delivering, dead.",
            labels=["status"],
        )
        for status, count in selectors.queue_depth(now=self.now).items():
            depth.add_metric([status], count)
        yield depth

        _, age = selectors.oldest_pending(now=self.now)
        yield GaugeMetricFamily(
            "relay_oldest_pending_seconds",
            "How long the longest-waiting due delivery has waited (0 when none).",
            value=age or 0.0,
        )

        yield GaugeMetricFamily(
            "relay_breakers_open",
            "Endpoints whose breaker is open or half-open (their rows are held).",
            value=alerts.breakers_open_count(),
        )
        yield GaugeMetricFamily(
            "relay_endpoints_disabled",
            "Endpoints that are disabled (their rows are held).",
            value=alerts.endpoints_disabled_count(),
        )
        alive, _ = alerts.dispatchers(now=self.now)
        yield GaugeMetricFamily(
            "relay_dispatchers_alive",
            "Dispatchers whose heartbeat is recent.",
            value=len(alive),
        )

        for histogram in counters.HISTOGRAMS:
            yield _histogram(totals, histogram)


def _histogram(
    totals: dict[tuple[str, str], float], histogram: counters.Histogram
) -> HistogramMetricFamily:
    buckets = [
        (str(bound), totals.get((f"{histogram.name}_bucket", str(bound)), 0.0))
        for bound in histogram.buckets
    ]
    buckets.append(("+Inf", totals.get((f"{histogram.name}_bucket", "+Inf"), 0.0)))
    return HistogramMetricFamily(
        f"relay_{histogram.name}",
        histogram.help,
        buckets=buckets,
        sum_value=totals.get((f"{histogram.name}_sum", ""), 0.0),
    )


def metrics_text(*, now: datetime) -> bytes:
    # A fresh registry per scrape: the process-global one would also export
    # this process's own Python metrics, which differ per gunicorn worker.
    registry = CollectorRegistry()
    registry.register(RelayCollector(now=now))
    return generate_latest(registry)


def metrics_view(request: HttpRequest) -> HttpResponse:
    try:
        text = metrics_text(now=utcnow())
    except DatabaseError:
        # Every series is read from the database: without it there is no answer.
        return HttpResponse(
            "database unavailable\n", status=503, content_type="text/plain"
        )
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)
