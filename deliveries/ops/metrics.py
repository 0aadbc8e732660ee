"""/metrics: the relay's Prometheus series, at a cost that does not grow with rows.

Gunicorn workers and dispatchers are separate processes, so nothing is kept
in process memory: counters are the sums of the shards every process writes
(deliveries.ops.counters); the gauges that count rows (queue depth,
oldest pending, breakers, disabled endpoints) are the dispatchers' last stored
figures (deliveries.ops.gauges), exported with their age. METRICS_TOKEN, when
set, is the bearer token a scraper must send.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
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

from deliveries.ops import alerts, counters, gauges
from relayproject.lib.clock import utcnow
from relayproject.lib.problems import problem_response

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


@dataclass(frozen=True)
class Reads:
    """What one scrape read, once, for every family to draw on."""

    now: datetime
    totals: dict[tuple[str, str], float]  # counter series summed over shards
    gauges: tuple[gauges.QueueGauges, datetime] | None  # and when computed


def counter_families(reads: Reads) -> Iterator[Metric]:
    deliveries = CounterMetricFamily(
        "relay_deliveries_total",
        "Deliveries that reached a final outcome.",
        labels=["outcome"],
    )
    for label, value in _labelled(
        reads.totals, counters.DELIVERIES, DELIVERY_OUTCOMES
    ).items():
        deliveries.add_metric([label], value)
    yield deliveries

    attempts = CounterMetricFamily(
        "relay_attempts_total", "HTTP attempts by result.", labels=["result"]
    )
    for label, value in _labelled(
        reads.totals, counters.ATTEMPTS, ATTEMPT_RESULTS
    ).items():
        attempts.add_metric([label], value)
    yield attempts

    yield CounterMetricFamily(
        "relay_reclaimed_total",
        "Deliveries taken over after their lease expired.",
        value=reads.totals.get((counters.RECLAIMED, ""), 0.0),
    )
    yield CounterMetricFamily(
        "relay_replayed_total",
        "Deliveries replayed by staff or the API.",
        value=reads.totals.get((counters.REPLAYED, ""), 0.0),
    )


def snapshot_families(reads: Reads) -> Iterator[Metric]:
    """The row-counting gauges as the dispatchers last stored them, and their
    age; never computed (no dispatcher has run): no samples, age +Inf."""
    stored, computed_at = reads.gauges or (None, None)
    age = (
        math.inf
        if computed_at is None
        else max(0.0, (reads.now - computed_at).total_seconds())
    )
    yield GaugeMetricFamily(
        "relay_gauges_age_seconds",
        "Seconds since a dispatcher computed relay_queue_depth, "
        "relay_oldest_pending_seconds, relay_breakers_open and "
        "relay_endpoints_disabled (+Inf: never; it grows while no dispatcher runs).",
        value=age,
    )
    depth = GaugeMetricFamily(
        "relay_queue_depth",
        "Deliveries by state: pending (due now, claimable), held (due, but the "
        "endpoint is disabled or its breaker not closed), awaiting_retry, "
        "delivering, dead, waiting (behind an ordered lane's head).",
        labels=["status"],
    )
    if stored is not None:
        for status, count in stored.queue_depth.items():
            depth.add_metric([status], count)
    yield depth
    yield GaugeMetricFamily(
        "relay_oldest_pending_seconds",
        "How long the longest-waiting due delivery had waited (0 when none).",
        value=None if stored is None else stored.oldest_pending_seconds,
    )
    yield GaugeMetricFamily(
        "relay_breakers_open",
        "Endpoints whose breaker is open or half-open (their rows are held).",
        value=None if stored is None else stored.breakers_open,
    )
    yield GaugeMetricFamily(
        "relay_endpoints_disabled",
        "Endpoints that are disabled (their rows are held).",
        value=None if stored is None else stored.endpoints_disabled,
    )


def dispatcher_families(reads: Reads) -> Iterator[Metric]:
    # Read live (a few heartbeat rows): this is what says nobody is counting.
    alive, _ = alerts.dispatchers(now=reads.now)
    yield GaugeMetricFamily(
        "relay_dispatchers_alive",
        "Dispatchers whose heartbeat is recent.",
        value=len(alive),
    )
    yield CounterMetricFamily(
        "relay_dispatchers_dead_total",
        "Dispatchers declared dead after their heartbeat stopped.",
        value=reads.totals.get((counters.DISPATCHERS_DEAD, ""), 0.0),
    )
    yield CounterMetricFamily(
        "relay_dead_dispatcher_released_total",
        "Deliveries released from dead dispatchers, claimable again at once.",
        value=reads.totals.get((counters.DEAD_DISPATCHER_RELEASED, ""), 0.0),
    )


def histogram_families(reads: Reads) -> Iterator[Metric]:
    for histogram in counters.HISTOGRAMS:
        yield _histogram(reads.totals, histogram)


# Each reads only what Reads holds or a handful of rows of its own: a scrape
# never reads deliveries, events or attempts (tests/deliveries/ops/test_metrics_cost.py).
FAMILIES: list[Callable[[Reads], Iterable[Metric]]] = [
    counter_families,
    snapshot_families,
    dispatcher_families,
    histogram_families,
]


class RelayCollector(Collector):
    """Yields every relay_* family from one read of the counters and the
    stored gauges."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        reads = Reads(
            now=self.now,
            totals=counters.counter_totals(),
            gauges=gauges.queue_gauges_stored(),
        )
        for family in FAMILIES:
            yield from family(reads)


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


def scraper_allowed(request: HttpRequest) -> bool:
    """True when METRICS_TOKEN is empty or the request bears exactly it."""
    token = settings.METRICS_TOKEN
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # Constant time: how much of a guess matched must not show in the timing.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not scraper_allowed(request):
        response = problem_response(
            401, "/metrics needs Authorization: Bearer <METRICS_TOKEN>."
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    try:
        text = metrics_text(now=utcnow())
    except DatabaseError:
        # Every series is read from the database: without it there is no answer.
        return HttpResponse(
            "database unavailable\n", status=503, content_type="text/plain"
        )
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)
