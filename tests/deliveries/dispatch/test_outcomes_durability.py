"""Which record transactions commit lazily (synchronous_commit off), and that
nothing else does: not the rest of the dispatcher's session, not a publish.

What a lazily committed record costs when the server crashes is shown in
tests/acceptance/test_server_crash.py, on a server of the test's own.
"""

from __future__ import annotations

import random
from contextlib import contextmanager

import pytest
from django.db import connection
from django.db.backends.signals import connection_created
from django.test.utils import CaptureQueriesContext

from deliveries.dispatch import dispatcher
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.transport import SendResult
from deliveries.models import Delivery
from deliveries.services import event_publish
from tests.support import factories
from tests.support.api import api_as
from tests.support.fakes import FakeClock, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def lazy_flushes(queries: list[str]) -> int:
    return sum(1 for sql in queries if "synchronous_commit = off" in sql)


@contextmanager
def every_session_sql():
    """The SQL of this thread's connection and of every connection opened
    meanwhile (the dispatcher's writer records on one of its own)."""
    captured: list[str] = []

    def keep(execute, sql, params, many, context):
        captured.append(sql)
        return execute(sql, params, many, context)

    def watch(sender, connection, **kwargs):
        connection.execute_wrappers.append(keep)

    connection_created.connect(watch)
    try:
        with connection.execute_wrapper(keep):
            yield captured
    finally:
        connection_created.disconnect(watch)


def record(clock: FakeClock, *results: SendResult) -> list[str]:
    """One dispatcher cycle, the SQL of its sessions captured."""
    worker = Dispatcher(
        worker_id="w",
        sender=ScriptedSender(*results),
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(3),
    )
    with every_session_sql() as queries:
        worker.run_once()
    worker.close()
    return queries


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_successes_at_rest_commit_lazily_and_the_session_stays_durable():
    clock = FakeClock()
    endpoint = factories.endpoint()
    for i in range(3):
        event_publish(
            merchant=endpoint.merchant, type="a", data={"i": i}, now=clock.now()
        )

    queries = record(clock, *[SendResult(status_code=200, duration_ms=3.0)] * 3)

    assert lazy_flushes(queries) >= 1
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    # SET LOCAL: the claim, the heartbeat and the next flush commit durably.
    assert synchronous_commit() == "on"


@pytest.mark.parametrize(
    "result",
    [
        SendResult(status_code=500, duration_ms=3.0),  # moves the breaker
        SendResult(status_code=410, duration_ms=3.0),  # disables the endpoint
        SendResult(status_code=None, duration_ms=3.0, error_kind="timeout"),
    ],
    ids=["failure", "gone", "error"],
)
def test_a_flush_that_moves_the_breaker_or_the_endpoint_commits_durably(result):
    clock = FakeClock()
    endpoint = factories.endpoint()
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())

    queries = record(clock, result)

    assert Delivery.objects.get().attempt_count == 1
    assert lazy_flushes(queries) == 0


def test_a_success_on_the_last_attempt_commits_durably():
    # Lost, it would be re-claimed out of attempts and dead-lettered.
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=1)
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())

    queries = record(clock, SendResult(status_code=200, duration_ms=3.0))

    assert Delivery.objects.get().status == "succeeded"
    assert lazy_flushes(queries) == 0


def test_a_publish_after_a_lazy_record_on_the_same_session_is_durable(monkeypatch):
    # Recorded on this test's session, not the writer's: the one the publish uses.
    monkeypatch.setattr(dispatcher, "writes_apart", lambda: False)
    clock = FakeClock()
    endpoint = factories.endpoint()
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())
    assert lazy_flushes(record(clock, SendResult(status_code=200, duration_ms=3.0)))
    api = api_as(endpoint.merchant)

    seen: list[str] = []
    inside = False

    def observe(execute, sql, params, many, context):
        # The setting in force for each of the publish's own statements.
        nonlocal inside
        result = execute(sql, params, many, context)
        if not inside:
            inside = True
            try:
                seen.append(synchronous_commit())
            finally:
                inside = False
        return result

    with connection.execute_wrapper(observe), CaptureQueriesContext(connection) as q:
        response = api.post(
            "/events",
            {
                "merchant": endpoint.merchant.slug,
                "type": "order.paid",
                "data": {"n": 1},
            },
        )

    assert response.status_code == 201, response.content
    assert seen and set(seen) == {"on"}
    publish_sql = [
        x["sql"] for x in q.captured_queries if not x["sql"].startswith("SHOW")
    ]
    assert not any("synchronous_commit" in sql for sql in publish_sql)
