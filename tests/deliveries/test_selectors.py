"""Pipeline summary and dead-letter analysis on a seeded data set with known answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from deliveries.ops import alerts, summary
from endpoints.models import EndpointHealth
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def ago(**kwargs) -> datetime:
    return NOW - timedelta(**kwargs)


@pytest.fixture
def world():
    a = factories.endpoint(url="http://127.0.0.1:9/a")
    b = factories.endpoint(url="http://127.0.0.1:9/b")
    seed.delivery(
        a, status="pending", created_at=ago(minutes=41), next_attempt_at=ago(minutes=40)
    )
    seed.delivery(a, status="pending", created_at=ago(minutes=1))
    seed.delivery(
        a,
        status="pending",
        created_at=ago(minutes=3),
        next_attempt_at=NOW + timedelta(minutes=10),
        attempts=1,
    )
    seed.delivery(b, status="delivering", created_at=ago(minutes=2), attempts=1)
    for created, took in (
        (ago(minutes=30), 60),
        (ago(minutes=10), 30),
        (ago(minutes=5), 60),
    ):
        seed.delivery(
            a,
            status="succeeded",
            created_at=created,
            succeeded_at=created + timedelta(seconds=took),
            attempts=1,
        )
    seed.delivery(
        a,
        status="succeeded",
        created_at=ago(hours=2),
        succeeded_at=ago(hours=2),
        attempts=1,
    )
    seed.delivery(
        a,
        status="dead",
        created_at=ago(minutes=30),
        dead_at=ago(minutes=10),
        attempts=10,
        last_status_code=500,
        last_error="HTTP 500",
    )
    seed.delivery(
        a,
        status="dead",
        created_at=ago(minutes=40),
        dead_at=ago(minutes=20),
        attempts=12,
        budget_start=2,
        last_status_code=500,
        last_error="HTTP 500",
    )
    seed.delivery(
        a,
        status="dead",
        created_at=ago(hours=6),
        dead_at=ago(hours=5),
        attempts=4,
        last_error="timeout",
    )
    seed.delivery(
        b,
        status="dead",
        created_at=ago(hours=3),
        dead_at=ago(hours=3),
        attempts=1,
        last_status_code=401,
        last_error="HTTP 401",
    )
    seed.delivery(
        b,
        status="dead",
        created_at=ago(hours=31),
        dead_at=ago(hours=30),
        attempts=1,
        last_status_code=403,
        last_error="HTTP 403",
    )
    return a, b


def test_pipeline_summary_counts_each_state_and_window(world):
    s = alerts.pipeline_summary(now=NOW)

    assert (s.pending, s.awaiting_retry, s.in_flight, s.dead) == (2, 1, 1, 5)
    assert (s.delivered_last_hour, s.failed_last_hour) == (3, 2)
    assert (s.dead_last_24h, s.dead_previous_24h) == (4, 1)
    assert s.oldest_pending_age_seconds == 40 * 60
    assert s.avg_latency_seconds_last_hour == pytest.approx(50.0)


def test_pipeline_summary_warns_of_old_pending_growing_dead_and_slow_endpoints(world):
    a, _ = world
    EndpointHealth.objects.filter(pk=a.pk).update(p95_ms=2500, sample_count=30)

    lines = [alert.text for alert in alerts.pipeline_summary(now=NOW).alerts]

    assert len(lines) == 3
    assert "waited 40 min 0 s" in lines[0]
    assert "4 in the last 24 h against 1" in lines[1]
    assert a.pk in lines[2] and "2500 ms" in lines[2]


def test_a_quiet_pipeline_has_no_alert():
    factories.endpoint()
    assert alerts.pipeline_summary(now=NOW).alerts == []


def test_slow_endpoints_need_enough_samples(world):
    a, b = world
    EndpointHealth.objects.filter(pk=a.pk).update(p95_ms=2500, sample_count=30)
    EndpointHealth.objects.filter(pk=b.pk).update(p95_ms=9000, sample_count=19)

    assert [s.endpoint_id for s in summary.slow_endpoints()] == [a.pk]


def test_dead_letter_analysis_groups_by_endpoint_for_the_window(world):
    a, b = world

    groups = summary.dead_letter_analysis(since=ago(hours=24), until=NOW)

    assert [g.endpoint_id for g in groups] == [a.pk, b.pk]
    ga, gb = groups
    assert (ga.count, ga.top_error, ga.top_error_count) == (3, "HTTP 500", 2)
    assert (ga.top_status_code, ga.top_status_count) == (500, 2)
    assert (ga.first_dead_at, ga.last_dead_at) == (ago(hours=5), ago(minutes=10))
    assert ga.avg_attempts == pytest.approx(8.0)  # (10 + 10 + 4) / 3, in budget
    assert (gb.count, gb.top_status_code, gb.avg_attempts) == (1, 401, 1.0)


@pytest.mark.parametrize(
    ("window", "expected"),
    [("1h", {"a": 2}), ("24h", {"a": 3, "b": 1}), ("7d", {"a": 3, "b": 2})],
)
def test_dead_letter_analysis_window(world, window, expected):
    a, b = world
    names = {a.pk: "a", b.pk: "b"}

    groups = summary.dead_letter_analysis(
        since=NOW - summary.WINDOWS[window], until=NOW
    )

    assert {names[g.endpoint_id]: g.count for g in groups} == expected


def test_minute_series_buckets_delivered_and_failed_per_minute(world):
    series = summary.minute_series(now=NOW)

    assert len(series) == 60
    assert sum(d for _, d, _ in series) == 3
    assert sum(f for _, _, f in series) == 2
    by_minute = {m: (d, f) for m, d, f in series}
    assert by_minute[ago(minutes=10)] == (1, 1)  # one died, one succeeded at -9m30s
    assert by_minute[ago(minutes=29)] == (1, 0)


@pytest.mark.parametrize(
    ("breaker_state", "active", "pending", "held"),
    [
        (EndpointHealth.State.CLOSED, True, 1, 0),
        (EndpointHealth.State.OPEN, True, 0, 1),
        (EndpointHealth.State.HALF_OPEN, True, 0, 1),
        (EndpointHealth.State.CLOSED, False, 0, 1),
    ],
)
def test_due_now_counts_only_rows_a_dispatcher_may_claim(
    breaker_state, active, pending, held
):
    endpoint = factories.endpoint()
    EndpointHealth.objects.filter(pk=endpoint.pk).update(breaker_state=breaker_state)
    type(endpoint).objects.filter(pk=endpoint.pk).update(is_active=active)
    seed.delivery(endpoint, status="pending", created_at=ago(minutes=5))

    s = alerts.pipeline_summary(now=NOW)

    assert (s.pending, s.held, s.awaiting_retry) == (pending, held, 0)
    # "Oldest pending" and "due now" describe the same rows.
    assert (s.oldest_pending_id is not None) == bool(pending)
