"""The recorder's writer: a flush that waits on a lock does not hold up claims."""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Delivery
from deliveries.services import event_publish
from tests.support import factories
from tests.support.fakes import BlockingSender, Reply
from tests.support.processes import dispatcher_database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def sessions_blocked_by(conn: psycopg.Connection) -> int:
    """Sessions waiting for a lock `conn` holds (read on a session of its own:
    pg_stat_activity is one snapshot per transaction)."""
    with psycopg.connect(dispatcher_database_url(), autocommit=True) as watcher:
        return watcher.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE %s = ANY(pg_blocking_pids(pid))",
            [conn.info.backend_pid],
        ).fetchone()[0]


def until(condition, *, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_a_claim_goes_ahead_while_a_flush_waits_on_a_row_lock(receiver):
    slow = factories.endpoint(url=receiver.url)
    other = factories.endpoint(url=receiver.url)
    first = event_publish(merchant=slow.merchant, type="a", data={})
    held = Delivery.objects.get(event=first)
    arrived, let_go = threading.Event(), threading.Event()

    def respond(request):
        if request.headers["webhook-id"] == first.id:
            arrived.set()
            let_go.wait(30)
        return Reply()

    receiver.respond = respond
    dispatcher = Dispatcher(
        worker_id="w1",
        sender=BlockingSender(timeout=30, body_limit=4096, allow_private=True),
        batch_size=10,
        concurrency=4,
        lease_seconds=60,
        poll_interval=0.05,
        rand=random.Random(1),
    )
    runs = threading.Thread(target=dispatcher.run)
    runs.start()
    with psycopg.connect(dispatcher_database_url()) as locker:
        try:
            assert arrived.wait(10), "the first delivery was never sent"
            # Its row, delivering, locked by another session: its flush must wait.
            locker.execute(
                f"SELECT 1 FROM {Delivery._meta.db_table} WHERE id = %s FOR UPDATE",
                [held.id],
            )
            let_go.set()
            assert until(lambda: sessions_blocked_by(locker) == 1), (
                "the flush never reached the locked row"
            )

            second = event_publish(merchant=other.merchant, type="b", data={})

            # Claimed and sent while the flush still waits.
            got = receiver.wait_for(2, timeout=10)
            assert second.id in {r.headers["webhook-id"] for r in got}, (
                "no claim while a flush waited on a lock"
            )
            assert sessions_blocked_by(locker) == 1
            held.refresh_from_db()
            assert held.status == Delivery.Status.DELIVERING
        finally:
            let_go.set()
            locker.rollback()
            dispatcher.stop()
            runs.join(30)
    assert not runs.is_alive()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
