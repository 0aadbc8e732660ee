"""/metrics, parsed with prometheus_client's own text parser."""

from __future__ import annotations

import math
from collections import Counter as Tally
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from prometheus_client.parser import text_string_to_metric_families

from deliveries.dispatch.maintenance import GaugeRefresher
from deliveries.ops import counters
from relayproject.lib.clock import utcnow
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_counters_are_summed_over_every_process_shard(client):
    for shard, n in (("dispatcher-a", 3), ("dispatcher-b", 4)):
        tally = Tally(
            {(counters.DELIVERIES, "succeeded"): n, (counters.ATTEMPTS, "retry"): 2 * n}
        )
        tally[(counters.RECLAIMED, "")] = 1
        counters.counters_add(shard=shard, tally=tally)
    counters.counters_add(shard="web", tally=Tally({(counters.REPLAYED, ""): 5}))

    m = scrape(client)

    assert m[("relay_deliveries_total", (("outcome", "succeeded"),))] == 7
    assert m[("relay_deliveries_total", (("outcome", "dead"),))] == 0
    assert m[("relay_attempts_total", (("result", "retry"),))] == 14
    assert m[("relay_reclaimed_total", ())] == 2
    assert m[("relay_replayed_total", ())] == 5


def test_attempt_duration_is_a_cumulative_histogram(client):
    tally = Tally()
    for seconds in (0.004, 0.2, 0.2, 3.0, 60.0):
        counters.ATTEMPT_DURATION.observe(tally, seconds)
    counters.counters_add(shard="a", tally=tally)

    m = scrape(client)

    def bucket(le):
        return m[("relay_attempt_duration_seconds_bucket", (("le", le),))]

    assert (bucket("0.005"), bucket("0.25"), bucket("5.0"), bucket("+Inf")) == (
        1,
        3,
        4,
        5,
    )
    assert m[("relay_attempt_duration_seconds_count", ())] == 5
    assert m[("relay_attempt_duration_seconds_sum", ())] == pytest.approx(63.404)


def test_a_flush_observed_at_once_fills_every_cumulative_bucket():
    """observe_many (a recorder's flush), against Prometheus's definition: a
    bucket counts every value at or under its bound, +Inf counts them all;
    values on a bound, past the last one, and a flush with none."""
    histogram = counters.ATTEMPT_DURATION
    values = [0.004, 0.005, 0.2, 0.25, 0.25, 3.0, 30.0, 60.0, 0.0]
    tally, nothing = Tally(), Tally()
    histogram.observe_many(tally, values)
    histogram.observe_many(nothing, [])

    expected = {
        ("attempt_duration_seconds_bucket", str(bound)): sum(v <= bound for v in values)
        for bound in histogram.buckets
    }
    expected[("attempt_duration_seconds_bucket", "+Inf")] = len(values)
    expected[("attempt_duration_seconds_count", "")] = len(values)
    assert {k: v for k, v in tally.items() if not k[0].endswith("_sum")} == {
        k: v for k, v in expected.items() if v
    }
    assert tally[("attempt_duration_seconds_sum", "")] == pytest.approx(sum(values))
    assert nothing == Tally()


def seed_queue(now):
    endpoint = factories.endpoint()
    seed.delivery(
        endpoint,
        status="pending",
        created_at=now - timedelta(minutes=6),
        next_attempt_at=now - timedelta(minutes=5),
    )
    seed.delivery(
        endpoint,
        status="pending",
        created_at=now,
        next_attempt_at=now + timedelta(hours=1),
    )
    seed.delivery(endpoint, status="delivering", created_at=now)
    seed.delivery(endpoint, status="dead", created_at=now, dead_at=now)
    seed.delivery(endpoint, status="succeeded", created_at=now, succeeded_at=now)
    seed.delivery(endpoint, status="waiting", created_at=now)  # behind a lane's head


def test_queue_gauges_are_the_dispatchers_last_count_with_its_age(client):
    now = utcnow()
    seed_queue(now)
    # What a dispatcher's maintenance does every few seconds.
    GaugeRefresher()(now - timedelta(seconds=7))

    m = scrape(client)

    depth = {k[1][0][1]: v for k, v in m.items() if k[0] == "relay_queue_depth"}
    assert depth == {
        "pending": 1,
        "held": 0,
        "awaiting_retry": 1,
        "delivering": 1,
        "dead": 1,
        "waiting": 1,
    }
    # As of the count, 7 s ago: the oldest had waited 5 min less those 7 s.
    assert m[("relay_oldest_pending_seconds", ())] == pytest.approx(293, abs=1)
    assert m[("relay_breakers_open", ())] == 0
    assert m[("relay_endpoints_disabled", ())] == 0
    assert 7 <= m[("relay_gauges_age_seconds", ())] < 60


def test_the_figures_do_not_move_without_a_dispatcher_and_their_age_says_so(client):
    now = utcnow()
    GaugeRefresher()(now - timedelta(minutes=10))
    seed_queue(now)  # after the last count: nobody has counted these

    m = scrape(client)

    depth = {k[1][0][1]: v for k, v in m.items() if k[0] == "relay_queue_depth"}
    assert depth == {
        "pending": 0,
        "held": 0,
        "awaiting_retry": 0,
        "delivering": 0,
        "dead": 0,
        "waiting": 0,
    }
    assert m[("relay_gauges_age_seconds", ())] >= 600


def test_a_refresh_within_the_interval_is_skipped_by_every_dispatcher(client):
    now = utcnow()
    GaugeRefresher()(now - timedelta(seconds=2))
    seed_queue(now)

    # A second dispatcher's step, 2 s after the first one counted.
    GaugeRefresher()(now)

    m = scrape(client)
    assert m[("relay_queue_depth", (("status", "dead"),))] == 0
    GaugeRefresher()(now + timedelta(seconds=4))
    assert scrape(client)[("relay_queue_depth", (("status", "dead"),))] == 1


def test_never_counted_gauges_have_no_samples_and_an_infinite_age(client):
    seed_queue(utcnow())

    m = scrape(client)

    assert m[("relay_gauges_age_seconds", ())] == math.inf
    for name in (
        "relay_queue_depth",
        "relay_oldest_pending_seconds",
        "relay_breakers_open",
        "relay_endpoints_disabled",
    ):
        assert not [key for key in m if key[0] == name], name


def test_an_empty_database_scrapes_zeroes(client):
    GaugeRefresher()(utcnow())
    m = scrape(client)
    assert m[("relay_oldest_pending_seconds", ())] == 0
    assert m[("relay_replayed_total", ())] == 0
    assert not any(
        name.startswith("python_") or name.startswith("process_") for name, _ in m
    )


def test_run_dispatcher_counts_the_gauges_metrics_serves(client):
    now = utcnow()
    seed_queue(now)
    assert scrape(client)[("relay_gauges_age_seconds", ())] == math.inf

    call_command(
        "run_dispatcher", "--drain", "--worker-id", "w-gauges", stdout=StringIO()
    )

    m = scrape(client)
    assert m[("relay_gauges_age_seconds", ())] < 60
    assert m[("relay_queue_depth", (("status", "dead"),))] == 1
