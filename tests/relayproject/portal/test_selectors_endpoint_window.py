"""The portal's 24 h endpoint health: the SQL of PostgreSQL against the Python reference."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from deliveries.models import Attempt
from deliveries.ops.stats import WINDOW
from relayproject.portal.selectors import _window_python, endpoint_window
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

NOW = datetime(2026, 12, 2, 12, 34, 56, tzinfo=UTC)


def test_hours_percentiles_and_success_match_the_reference():
    rng = random.Random(11)
    endpoint, other = factories.endpoint(), factories.endpoint()
    attempts = []
    for n in range(300):
        target = endpoint if n % 5 else other
        started = NOW - timedelta(seconds=rng.uniform(0, 26 * 3600))  # some too old
        d = seed.delivery(target, status="succeeded", created_at=started)
        attempts.append(
            Attempt(
                delivery=d,
                endpoint=target,
                number=1,
                started_at=started,
                # No duration for a failure before the answer (e.g. connect).
                response_ms=None if n % 7 == 0 else rng.lognormvariate(4, 1),
                outcome="succeeded" if rng.random() < 0.7 else "retry",
            )
        )
    Attempt.objects.bulk_create(attempts)
    since = NOW - WINDOW
    first_hour = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)

    window = endpoint_window(endpoint_id=endpoint.pk, now=NOW)
    counts, quantiles, samples, successes = _window_python(
        endpoint.pk, since=since, first_hour=first_hour
    )

    assert [[h.attempts, h.failures] for h in window.hours] == counts
    assert sum(h.attempts for h in window.hours) > 150  # the other endpoint is not in
    assert (window.p50_ms, window.p95_ms, window.p99_ms) == pytest.approx(quantiles)
    assert (window.samples, window.success_rate) == (samples, successes / samples)
    assert [h.start for h in window.hours][:2] == [
        datetime(2026, 12, 1, 13, tzinfo=UTC),
        datetime(2026, 12, 1, 14, tzinfo=UTC),
    ]


def test_an_endpoint_without_attempts_has_no_percentiles():
    window = endpoint_window(endpoint_id=factories.endpoint().pk, now=NOW)
    assert (window.p50_ms, window.samples, window.success_rate) == (None, 0, None)
    assert sum(h.attempts for h in window.hours) == 0
