"""Quotas stay exact when two transactions race, on real PostgreSQL.

Each thread has its own connection; the first holds its transaction open
until the second is seen waiting for its lock (or has finished without
waiting, which is the bug these tests catch).
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from deliveries.models import Delivery, Event, PublishBucket
from deliveries.publish.ingest import events_ingest
from deliveries.publish.rate import publish_rate_take
from endpoints.models import Endpoint, Merchant
from endpoints.services import endpoint_create
from relayproject.lib.clock import utcnow
from relayproject.lib.limits import LimitExceeded
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread
from tests.support import factories
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

URL = "http://127.0.0.1:9/hook"


def _waiting_for_a_lock(pid: int | None) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        )
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def _held_open(work, done: threading.Event, finish: threading.Event):
    def run():
        with transaction.atomic():
            result = work()
            done.set()
            assert finish.wait(WAIT)
        return result

    return run


def _race(first, second):
    """first() in a transaction held open; second() on another connection,
    until it waits for first's lock or ends; then first commits. Both results."""
    done, finish = threading.Event(), threading.Event()
    a = InThread(_held_open(first, done, finish))
    assert done.wait(WAIT)
    b = InThread(second)
    try:
        assert b.connected.wait(WAIT)
        wait_until(
            lambda: not b.thread.is_alive() or _waiting_for_a_lock(b.backend_pid),
            timeout=WAIT,
            what="the second transaction to wait for the first or finish",
        )
    finally:
        finish.set()
    a_result = a.join()
    try:
        return a_result, b.join()
    except LimitExceeded as exc:
        return a_result, exc


def test_two_creates_cannot_both_take_a_merchants_last_endpoint():
    merchant = factories.merchant("acme")
    Merchant.objects.filter(pk=merchant.pk).update(max_endpoints=2)
    factories.endpoint(merchant)  # one of two

    def create():
        return endpoint_create(
            merchant=Merchant.objects.get(slug="acme"), url=URL, now=utcnow()
        )

    first, second = _race(create, create)

    assert isinstance(first, Endpoint)
    assert isinstance(second, LimitExceeded)
    assert second.setting == "MAX_ENDPOINTS_PER_MERCHANT"
    assert Endpoint.objects.filter(merchant=merchant).count() == 2


def test_a_publish_that_races_for_the_last_tokens_sees_them_taken():
    merchant = factories.merchant("acme")
    Merchant.objects.filter(pk=merchant.pk).update(
        publish_rate_per_second=0.0001, publish_burst=3
    )
    merchant.refresh_from_db()
    now = utcnow().timestamp()
    publish_rate_take(costs={merchant.pk: (merchant, 2)}, now=now)  # one left

    def take():
        return publish_rate_take(costs={merchant.pk: (merchant, 1)}, now=now)

    first, second = _race(take, take)

    assert first is None  # granted
    assert isinstance(second, LimitExceeded)
    assert second.status == 429
    assert second.retry_after > 9000  # a token in 10,000 s
    assert PublishBucket.objects.get().tokens == pytest.approx(0, abs=0.01)


def test_two_api_publishes_race_for_the_last_token_and_one_writes():
    # The API's publish takes its token in its writing statement: the loser
    # waits for the winner's row lock, sees the token gone, writes nothing.
    merchant = factories.merchant("acme")
    Merchant.objects.filter(pk=merchant.pk).update(
        publish_rate_per_second=0.0001, publish_burst=2
    )
    factories.endpoint(merchant)
    events_ingest(items=[("acme", "order.paid", {"n": 0})])  # one token left

    def publish():
        return events_ingest(items=[("acme", "order.paid", {"n": 1})])

    first, second = _race(publish, publish)

    assert len(first) == 1
    assert isinstance(second, LimitExceeded)
    assert second.status == 429
    assert PublishBucket.objects.get().tokens == pytest.approx(0, abs=0.01)
    assert Event.objects.count() == Delivery.objects.count() == 2
