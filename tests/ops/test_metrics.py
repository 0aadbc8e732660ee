"""/metrics, parsed with prometheus_client's own text parser."""

from __future__ import annotations

from collections import Counter as Tally
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from deliveries.dispatch import counters
from relayproject.clock import utcnow
from tests import factories
from tests.ops import seed

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
        counters.observe_duration(tally, seconds)
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


def test_queue_depth_and_oldest_pending_are_read_at_scrape_time(client):
    endpoint = factories.endpoint()
    now = utcnow()
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

    m = scrape(client)

    depth = {k[1][0][1]: v for k, v in m.items() if k[0] == "relay_queue_depth"}
    assert depth == {"pending": 1, "awaiting_retry": 1, "delivering": 1, "dead": 1}
    assert 300 <= m[("relay_oldest_pending_seconds", ())] < 400


def test_an_empty_database_scrapes_zeroes(client):
    m = scrape(client)
    assert m[("relay_oldest_pending_seconds", ())] == 0
    assert m[("relay_replayed_total", ())] == 0
    assert not any(
        name.startswith("python_") or name.startswith("process_") for name, _ in m
    )
