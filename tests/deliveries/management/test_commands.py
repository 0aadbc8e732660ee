"""relay_status, refresh_endpoint_stats and prune_deliveries, through call_command."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from deliveries.models import Attempt, Delivery, Event
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def troubled():
    endpoint = factories.endpoint(url="http://127.0.0.1:9/failing")
    now = utcnow()
    seed.delivery(
        endpoint,
        status="pending",
        created_at=now - timedelta(hours=1),
        next_attempt_at=now - timedelta(minutes=45),
    )
    for minutes in (5, 15):
        seed.delivery(
            endpoint,
            status="dead",
            created_at=now - timedelta(minutes=minutes + 1),
            dead_at=now - timedelta(minutes=minutes),
            attempts=3,
            last_status_code=401,
            last_error="HTTP 401",
        )
    EndpointHealth.objects.filter(pk=endpoint.pk).update(
        p50_ms=900, p95_ms=3100, p99_ms=4000, sample_count=25
    )
    return endpoint


def test_relay_status_prints_summary_dead_letters_and_slow_endpoints(troubled):
    out = run("relay_status")

    assert "pending (due now)         1" in out
    assert "WARNING: Oldest pending delivery" in out
    assert "WARNING: Dead letters are growing: 2" in out
    dead_line = next(
        line
        for line in out.splitlines()
        if line.startswith(troubled.pk) and "HTTP 401" in line
    )
    assert dead_line.count("HTTP 401 Unauthorized (2)") == 2 and "3.0" in dead_line
    slow_line = next(
        line
        for line in out.splitlines()
        if line.startswith(troubled.pk) and "3100" in line
    )
    assert "900" in slow_line and "sending" in slow_line


def test_relay_status_json_is_one_document_for_scripts(troubled):
    doc = json.loads(run("relay_status", "--json", "--window", "1h"))

    assert doc["summary"]["pending"] == 1
    assert doc["summary"]["dead_last_24h"] == 2
    assert doc["summary"]["slow_endpoints"][0]["endpoint_id"] == troubled.pk
    assert doc["dead_letters"]["window"] == "1h"
    [group] = doc["dead_letters"]["endpoints"]
    assert (group["count"], group["top_status_code"]) == (2, 401)


def test_relay_status_on_a_quiet_system():
    out = run("relay_status")
    assert "no alerts" in out
    assert out.count("none") >= 3


def test_refresh_endpoint_stats_reports_the_endpoints_it_refreshed():
    factories.endpoint()
    factories.endpoint()
    assert (
        run("refresh_endpoint_stats").strip()
        == "refreshed the statistics of 2 endpoints"
    )


@pytest.fixture
def history():
    endpoint = factories.endpoint()
    other = factories.endpoint(endpoint.merchant, url="http://127.0.0.1:9/other")
    return seed.history(
        endpoint, other, old=utcnow() - timedelta(days=40), now=utcnow()
    )


def test_prune_deletes_old_succeeded_with_attempts_and_orphaned_events(history):
    out = run("prune_deliveries", "--older-than", "30", "--batch-size", "1")

    assert out.startswith("deleted 2 deliveries, 3 attempts, 1 events")
    remaining = set(Delivery.objects.values_list("pk", flat=True))
    assert (
        history["succeeded"].pk not in remaining
        and history["shared"].pk not in remaining
    )
    assert {
        history[s].pk for s in ("pending", "delivering", "dead", "recent")
    } <= remaining
    assert not Event.objects.filter(pk=history["succeeded"].event_id).exists()
    assert Event.objects.filter(pk=history["shared"].event_id).exists()
    assert not Attempt.objects.filter(delivery_id=history["succeeded"].pk).exists()
    assert Attempt.objects.filter(delivery_id=history["dead"].pk).count() == 2


def test_prune_include_dead_also_deletes_old_dead_letters_but_never_pending_or_delivering(
    history,
):
    run("prune_deliveries", "--older-than", "30", "--include-dead")

    statuses = set(Delivery.objects.values_list("status", flat=True))
    assert statuses == {"pending", "delivering", "succeeded"}
    assert Delivery.objects.filter(pk=history["pending"].pk).exists()
    assert Delivery.objects.filter(pk=history["delivering"].pk).exists()
    assert not Delivery.objects.filter(pk=history["dead"].pk).exists()


def test_prune_dry_run_counts_and_deletes_nothing(history):
    before = Delivery.objects.count(), Attempt.objects.count(), Event.objects.count()

    out = run("prune_deliveries", "--older-than", "30", "--dry-run", "--include-dead")

    assert out.startswith("would delete 3 deliveries, 5 attempts, 2 events")
    assert (
        Delivery.objects.count(),
        Attempt.objects.count(),
        Event.objects.count(),
    ) == before
