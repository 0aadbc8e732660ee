"""Per-endpoint 24 h percentiles against a reference computed in Python."""

from __future__ import annotations

import random
import statistics
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from deliveries.models import Attempt
from deliveries.ops.stats import endpoint_latency, endpoint_stats_refresh
from endpoints.models import EndpointHealth
from tests.support import factories, seed

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _attempts(endpoint, values, *, started_at, outcome="succeeded"):
    d = seed.delivery(endpoint, status="succeeded", created_at=started_at)
    Attempt.objects.bulk_create(
        Attempt(
            delivery=d,
            endpoint=endpoint,
            number=i + 1,
            started_at=started_at,
            response_ms=ms,
            outcome=outcome,
        )
        for i, ms in enumerate(values)
    )


def _reference(values):
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[94], cuts[98]


def _check_against_reference():
    rng = random.Random(7)
    endpoint = factories.endpoint()
    recent = [rng.lognormvariate(4, 1) for _ in range(257)]
    _attempts(endpoint, recent, started_at=NOW - timedelta(hours=3))
    _attempts(endpoint, [99999.0] * 50, started_at=NOW - timedelta(hours=25))

    p50, p95, p99, samples, rate = endpoint_latency(since=NOW - timedelta(hours=24))[
        endpoint.pk
    ]

    assert (p50, p95, p99) == pytest.approx(_reference(recent), rel=1e-9)
    assert (samples, rate) == (257, 1.0)


@pytest.mark.django_db
@pytest.mark.both_backends
def test_percentiles_match_statistics_quantiles_on_this_backend():
    _check_against_reference()


@pytest.mark.django_db
@pytest.mark.postgres
def test_percentile_cont_on_postgresql_matches_statistics_quantiles(on_postgres):
    assert connection.vendor == "postgresql"
    _check_against_reference()


@pytest.mark.django_db
@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("p95", "slow", "threshold"),
    [(100.0, False, 10), (2500.0, True, 10), (6000.0, True, 5)],
)
def test_refresh_flags_slow_endpoints_and_halves_the_threshold(
    settings, p95, slow, threshold
):
    settings.BREAKER_FAILURE_THRESHOLD = 10
    endpoint = factories.endpoint()
    _attempts(endpoint, [p95] * 20, started_at=NOW - timedelta(hours=1))

    endpoint_stats_refresh(now=NOW)

    health = EndpointHealth.objects.get(pk=endpoint.pk)
    assert health.p95_ms == pytest.approx(p95)
    assert (health.is_slow, health.failure_threshold) == (slow, threshold)
    assert health.stats_refreshed_at == NOW


@pytest.mark.django_db
@pytest.mark.both_backends
def test_refresh_clears_an_endpoint_with_no_recent_attempts():
    endpoint = factories.endpoint()
    EndpointHealth.objects.filter(pk=endpoint.pk).update(
        p95_ms=9000, is_slow=True, sample_count=40
    )

    endpoint_stats_refresh(now=NOW)

    health = EndpointHealth.objects.get(pk=endpoint.pk)
    assert (health.p95_ms, health.sample_count, health.is_slow) == (None, 0, False)
