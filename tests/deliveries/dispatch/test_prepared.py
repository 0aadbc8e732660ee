"""The dispatcher's hot statements are prepared once per session, on real PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from deliveries.dispatch import claiming, prepared, session
from deliveries.dispatch.session import limit_dispatcher_sessions
from deliveries.models import Event
from deliveries.publish.ingest import events_ingest
from deliveries.services import event_publish
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def prepared_count(like: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            [like],
        )
        return cursor.fetchone()[0]


def prepared_claims() -> int:
    return prepared_count("%FOR UPDATE SKIP LOCKED%")


def claims_of_one(endpoint, times: int) -> None:
    """Publish one event, claim its one delivery; `times` times."""
    for _ in range(times):
        event_publish(merchant=endpoint.merchant, type="a", data={})
        claim = claiming.claim_batch(
            worker_id="w", now=utcnow(), lease_seconds=60, limit=5
        )
        assert len(claim.delivery_ids) == 1


def test_a_dispatcher_session_prepares_the_claim_once_it_repeats():
    endpoint = factories.endpoint()
    connection.ensure_connection()
    raw = connection.connection
    raw.prepare_threshold = prepared.PREPARE_THRESHOLD  # as session.py sets it
    try:
        claims_of_one(endpoint, prepared.PREPARE_THRESHOLD + 1)
        assert prepared_claims() == 1
    finally:
        raw.prepare_threshold = None


def test_other_sessions_prepare_nothing():
    endpoint = factories.endpoint()
    for _ in range(prepared.PREPARE_THRESHOLD + 1):
        event_publish(merchant=endpoint.merchant, type="a", data={})
        claiming.claim_batch(worker_id="w", now=utcnow(), lease_seconds=60, limit=5)
    assert prepared_claims() == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_the_setting_decides_whether_dispatcher_sessions_prepare(
    settings, monkeypatch, enabled
):
    settings.DB_PREPARED_STATEMENTS = enabled

    class NotYetConnected:
        vendor = "postgresql"
        connection = None
        settings_dict = {"OPTIONS": {}}

    unconnected = NotYetConnected()
    monkeypatch.setattr(session, "connections", {"default": unconnected})
    # Not this test process's own sessions: they stay on automatic plans.
    monkeypatch.setattr(session, "_GENERIC_PLAN_ALIASES", set())
    limit_dispatcher_sessions()
    assert ("prepare_threshold" in unconnected.settings_dict["OPTIONS"]) is enabled


@pytest.mark.parametrize("enabled", [True, False])
def test_a_web_session_prepares_the_publish_once_it_repeats(settings, enabled):
    # The API's writing statement (deliveries/publish/outbox.py) is planned
    # once per session, not at every publish; the events' and deliveries'
    # number does not change its text.
    settings.DB_PREPARED_STATEMENTS = enabled
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    for n in range(4):
        events_ingest(items=[("acme", "order.created", {"n": n})] * (n + 1))
    assert prepared_count("%INSERT INTO deliveries_event%") == (1 if enabled else 0)
    assert connection.connection.prepare_threshold is None  # as Django left it
    assert Event.objects.count() == 10


def plans_of(like: str) -> tuple[int, int]:
    """(generic, custom) plans made so far for this session's statements like `like`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)"
            " FROM pg_prepared_statements WHERE statement LIKE %s",
            [like],
        )
        return tuple(cursor.fetchone())


def test_a_dispatcher_session_plans_the_claim_once_not_at_every_claim():
    # Left to PostgreSQL (plan_cache_mode = auto), the lock-and-mark over the
    # day-partitioned deliveries is planned anew at every claim (a custom
    # plan prunes partitions while planning, so it always looks cheaper).
    endpoint = factories.endpoint()
    connection.ensure_connection()
    raw = connection.connection
    raw.prepare_threshold = prepared.PREPARE_THRESHOLD
    session.generic_plans(connection)  # as a dispatcher's sessions get it
    try:
        claims_of_one(endpoint, prepared.PREPARE_THRESHOLD + 8)
        generic, custom = plans_of("%FOR UPDATE SKIP LOCKED%")
        assert custom == 0 and generic >= 8
    finally:
        raw.prepare_threshold = None
        with raw.cursor() as cursor:
            cursor.execute("RESET plan_cache_mode")


def test_only_a_dispatcher_process_sessions_plan_generically():
    probe = connections["default"].copy("dispatcher_probe")
    connections["dispatcher_probe"] = probe
    try:
        limit_dispatcher_sessions("dispatcher_probe")
        with probe.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            assert cursor.fetchone()[0] == "force_generic_plan"
        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            assert cursor.fetchone()[0] == "auto"
    finally:
        probe.close()
        del connections["dispatcher_probe"]
        session._GENERIC_PLAN_ALIASES.discard("dispatcher_probe")
