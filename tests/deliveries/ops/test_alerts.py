"""Alerts that fire: an open breaker, a disabled endpoint and a stale dispatcher
each appear on pipeline health, in `relay_status --check` and in /metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from deliveries.dispatch.heartbeat import Heartbeat, heartbeat_touch
from deliveries.dispatch.maintenance import GaugeRefresher
from deliveries.models import DispatcherHeartbeat
from deliveries.ops import alerts
from deliveries.pull.sessions import session_end, session_start
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.deliveries.ops.test_metrics import scrape
from tests.support import factories, seed

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

NOW = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)


def check() -> tuple[int, str]:
    """relay_status --check: (exit status, what it printed)."""
    out = StringIO()
    try:
        call_command("relay_status", "--check", stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def kinds(now: datetime) -> list[str]:
    return [a.kind for a in alerts.pipeline_summary(now=now).alerts]


def pipeline(client) -> str:
    return client.get(reverse("admin:deliveries_pipeline")).content.decode()


def test_a_quiet_system_passes_the_check(admin_client):
    factories.endpoint()
    heartbeat_touch(worker_id="w1", started_at=utcnow(), now=utcnow())

    status, out = check()

    assert status == 0 and "\nno alerts\n" in out
    assert scrape(admin_client)[("relay_dispatchers_alive", ())] == 1
    assert "No alert" in pipeline(admin_client)


def test_an_open_breaker_is_an_alert_with_its_held_rows(admin_client):
    endpoint = factories.endpoint(url="http://127.0.0.1:9/down")
    now = utcnow()
    for _ in range(3):
        seed.delivery(endpoint, status="pending", created_at=now)
    endpoint_breaker_open(
        endpoint_id=endpoint.pk, reason="10 consecutive failures", now=now
    )

    [alert] = alerts.pipeline_summary(now=now).alerts

    assert alert.kind == "breaker_open"
    assert alert.text.startswith(f"Endpoint {endpoint.pk} (")
    assert "paused since" in alert.text and "Breaker" not in alert.text
    assert "after 10 failures in a row: 3 deliveries held; next try at" in alert.text
    assert alert.text in pipeline(admin_client)
    status, out = check()
    assert status == 1 and f"WARNING: {alert.text}" in out
    GaugeRefresher()(utcnow())  # the dispatchers' count /metrics serves
    assert scrape(admin_client)[("relay_breakers_open", ())] == 1


def test_a_half_open_breaker_is_an_alert_too():
    endpoint = factories.endpoint()
    endpoint.health.breaker_state = "half_open"
    endpoint.health.save()
    assert kinds(utcnow()) == ["breaker_open"]


def test_an_endpoint_disabled_in_the_last_day_is_an_alert(admin_client):
    recent, old = factories.endpoint(), factories.endpoint()
    now = utcnow()
    seed.delivery(recent, status="pending", created_at=now)
    endpoint_disable(endpoint=recent, reason="410 Gone", now=now - timedelta(hours=2))
    endpoint_disable(endpoint=old, reason="by staff", now=now - timedelta(hours=25))

    [alert] = alerts.pipeline_summary(now=now).alerts

    assert alert.kind == "endpoint_disabled"
    assert alert.text.startswith(f"Endpoint {recent.pk} (")
    assert "(410 Gone): 1 delivery held until it is enabled." in alert.text
    assert alert.text in pipeline(admin_client)
    assert check()[0] == 1
    GaugeRefresher()(utcnow())  # the dispatchers' count /metrics serves
    assert scrape(admin_client)[("relay_endpoints_disabled", ())] == 2


def test_held_rows_do_not_also_raise_the_oldest_pending_alert():
    endpoint = factories.endpoint()
    seed.delivery(endpoint, status="pending", created_at=NOW - timedelta(hours=3))
    endpoint_disable(endpoint=endpoint, reason="x", now=NOW - timedelta(hours=1))

    assert kinds(NOW) == ["endpoint_disabled"]


def test_a_dispatcher_that_stops_beating_is_listed_with_its_last_seen_time(
    settings,
):
    settings.DISPATCHER_DEAD_AFTER_SECONDS = 20
    heartbeat_touch(worker_id="host-a-1", now=NOW)

    assert kinds(NOW + timedelta(seconds=19)) == []
    [alert] = alerts.pipeline_summary(now=NOW + timedelta(seconds=21)).alerts
    assert alert.kind == "dispatcher_stale"
    assert alert.text == (
        "Dispatcher host-a-1 stopped heartbeating: last seen 14:00:00 UTC."
    )


def test_a_stale_dispatcher_fails_the_check_and_the_alive_gauge(admin_client):
    now = utcnow()
    heartbeat_touch(worker_id="alive", started_at=now, now=now)
    heartbeat_touch(worker_id="gone", started_at=now, now=now - timedelta(minutes=5))

    status, out = check()

    assert status == 1 and "WARNING: Dispatcher gone stopped heartbeating" in out
    assert scrape(admin_client)[("relay_dispatchers_alive", ())] == 1
    page = pipeline(admin_client)
    assert "Dispatcher gone stopped heartbeating" in page
    assert "1 alive, 1 stale" in page


def test_a_clean_stop_removes_the_row_and_a_day_old_row_is_forgotten():
    heartbeat_touch(worker_id="stopped", now=NOW)
    Heartbeat(worker_id="stopped", dead_after=20).stop()
    heartbeat_touch(worker_id="ancient", started_at=NOW, now=NOW - timedelta(days=2))
    heartbeat_touch(worker_id="w1", started_at=NOW, now=NOW)

    assert list(DispatcherHeartbeat.objects.values_list("worker_id", flat=True)) == [
        "w1"
    ]


def test_the_alert_list_is_one_list_others_can_extend(monkeypatch):
    extra = alerts.Alert("custom", "An operational endpoint is dead.")
    monkeypatch.setattr(alerts, "CHECKS", [*alerts.CHECKS, lambda summary: [extra]])
    assert kinds(NOW) == ["custom"]


def test_an_ended_listen_session_is_no_disabled_endpoint_alert(admin_client):
    now = utcnow()
    session = session_start(merchant=factories.merchant(), now=now)
    session_end(endpoint=session, why="stopped", now=now)

    assert kinds(now) == []
    assert alerts.endpoints_disabled_count() == 0
