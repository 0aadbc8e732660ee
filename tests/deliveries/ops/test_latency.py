"""Publish-to-first-attempt and publish-to-success percentiles, on known answers."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from deliveries.dispatch.maintenance import StatsRefresher
from deliveries.models import Attempt
from deliveries.ops.latency import (
    PIPELINE,
    SNAPSHOT_MAX_AGE,
    Percentiles,
    publish_latency,
    publish_latency_recent,
    publish_latency_refresh,
)
from deliveries.ops.stats import percentile_cont
from relayproject.lib.clock import frozen
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _published(endpoint, *, ago: timedelta, first_after: float | None, success_after):
    created = NOW - ago
    d = seed.delivery(
        endpoint,
        status="succeeded" if success_after is not None else "pending",
        created_at=created,
        succeeded_at=created + timedelta(seconds=success_after)
        if success_after is not None
        else None,
    )
    if first_after is not None:
        Attempt.objects.create(
            delivery=d,
            endpoint=endpoint,
            number=1,
            started_at=created + timedelta(seconds=first_after),
            outcome="retry",
        )
    return d


def _reference(values):
    # Timestamps keep microseconds, so compare to that precision.
    values = sorted(values)
    return pytest.approx(
        [percentile_cont(values, q) for q in (0.5, 0.95, 0.99)], abs=2e-6
    )


def _rounded(p):
    return [p.p50, p.p95, p.p99]


def test_percentiles_per_endpoint_and_for_the_pipeline_match_a_reference():
    rng = random.Random(13)
    fast, slow = factories.endpoint(), factories.endpoint()
    expected_first = {fast.pk: [], slow.pk: []}
    expected_success = {fast.pk: [], slow.pk: []}
    for endpoint, scale in ((fast, 0.05), (slow, 30.0)):
        for _ in range(40):
            first = rng.uniform(0, scale)
            success = first + rng.uniform(0, scale) if rng.random() < 0.8 else None
            _published(
                endpoint,
                ago=timedelta(hours=rng.uniform(0, 23)),
                first_after=first,
                success_after=success,
            )
            expected_first[endpoint.pk].append(first)
            if success is not None:
                expected_success[endpoint.pk].append(success)
    # Outside the window, and not yet tried: neither counts where it should not.
    _published(fast, ago=timedelta(hours=25), first_after=999, success_after=999)
    _published(fast, ago=timedelta(minutes=1), first_after=None, success_after=None)

    latency = publish_latency(now=NOW)

    for endpoint_id in (fast.pk, slow.pk):
        assert _rounded(latency.first_attempt[endpoint_id]) == _reference(
            expected_first[endpoint_id]
        )
        assert _rounded(latency.success[endpoint_id]) == _reference(
            expected_success[endpoint_id]
        )
    everything = expected_first[fast.pk] + expected_first[slow.pk]
    assert _rounded(latency.first_attempt[PIPELINE]) == _reference(everything)
    assert latency.first_attempt[PIPELINE].samples == 80


def test_relay_status_and_the_pipeline_page_show_the_latency(admin_client, settings):
    endpoint = factories.endpoint()
    for seconds in (1, 2, 3, 4):
        _published(
            endpoint,
            ago=timedelta(minutes=5),
            first_after=seconds / 10,
            success_after=seconds,
        )

    # The command and the page read the project's clock: pinned at NOW, the
    # publishes are "5 minutes ago" whatever the date the suite runs on.
    out, text = StringIO(), StringIO()
    with frozen(NOW):
        call_command("relay_status", "--json", stdout=out)
        call_command("relay_status", stdout=text)
        page = admin_client.get(reverse("admin:deliveries_pipeline")).content.decode()
    document = json.loads(out.getvalue())["latency_24h"]

    success = document["publish_to_success_seconds"]
    assert success["pipeline"]["p50"] == pytest.approx(2.5)
    assert success[endpoint.pk]["samples"] == 4
    assert "Publish to delivery, last 24 h" in text.getvalue()
    assert "whole pipeline" in text.getvalue()
    assert 'id="publish-latency"' in page and endpoint.pk in page
    assert "2.5 s" in page and "250 ms" in page


def test_pages_read_the_stored_latency_until_it_is_stale():
    endpoint = factories.endpoint()
    _published(endpoint, ago=timedelta(hours=1), first_after=1, success_after=2)
    publish_latency_refresh(now=NOW)
    _published(endpoint, ago=timedelta(hours=1), first_after=3, success_after=4)

    stored, at = publish_latency_recent(now=NOW + timedelta(minutes=1))
    assert at == NOW and stored.success[endpoint.pk].samples == 1

    stale = NOW + SNAPSHOT_MAX_AGE + timedelta(seconds=1)
    fresh, at = publish_latency_recent(now=stale)
    assert at == stale and fresh.success[endpoint.pk].samples == 2
    # A snapshot from a clock ahead of this one is not taken either.
    _, at = publish_latency_recent(now=NOW)
    assert at == NOW


def test_the_maintenance_step_stores_the_latency():
    endpoint = factories.endpoint()
    _published(endpoint, ago=timedelta(hours=1), first_after=1, success_after=2)
    refresher = StatsRefresher(every=0)

    refresher(NOW)

    stored, at = publish_latency_recent(now=NOW + timedelta(seconds=30))
    assert at == NOW
    assert stored.first_attempt[PIPELINE] == Percentiles(1.0, 1.0, 1.0, 1)
