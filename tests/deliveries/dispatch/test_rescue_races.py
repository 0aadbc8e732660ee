"""The death judgement against beats and outcomes in flight, on real PostgreSQL:
a second transaction opened on purpose, on its own thread and connection."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models.functions import Now

from deliveries.dispatch import claiming, rescue
from deliveries.dispatch.heartbeat import heartbeat_touch
from deliveries.models import Delivery, DispatcherHeartbeat
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread, publish

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DEAD_AFTER = 20
LEASE = 3600


def blocked_or_done(judge: InThread) -> None:
    """Until the judge has finished or waits for a lock: never a fixed sleep."""
    deadline = time.monotonic() + WAIT
    assert judge.connected.wait(WAIT)
    while judge.thread.is_alive() and time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                [judge.backend_pid],
            )
            row = cursor.fetchone()
        if row and row[0] == "Lock":
            return
        time.sleep(0.01)


def test_a_beat_committing_during_the_judgement_is_not_a_death():
    publish(3)
    claiming.claim_batch(worker_id="slow", now=utcnow(), lease_seconds=LEASE, limit=3)
    heartbeat_touch(worker_id="slow", now=utcnow() - timedelta(seconds=DEAD_AFTER + 5))

    # The slow dispatcher's beat has reached its row and not committed yet.
    with transaction.atomic():
        DispatcherHeartbeat.objects.filter(worker_id="slow").update(last_seen_at=Now())
        judge = InThread(
            lambda: rescue.dispatchers_rescue(judge="judge", dead_after=DEAD_AFTER)
        )
        blocked_or_done(judge)
    rescued = judge.join()

    assert rescued == []
    assert DispatcherHeartbeat.objects.get(worker_id="slow").deaths == 0
    assert not Delivery.objects.filter(next_attempt_at__lte=utcnow()).exists()


def test_a_row_being_recorded_is_left_for_the_next_judgement_and_never_waited_for():
    [first, *_] = publish(3)
    claiming.claim_batch(worker_id="gone", now=utcnow(), lease_seconds=LEASE, limit=3)
    heartbeat_touch(worker_id="gone", now=utcnow() - timedelta(seconds=DEAD_AFTER + 5))
    recording = threading.Event()
    finish = threading.Event()

    def recorder() -> None:
        with transaction.atomic():
            Delivery.objects.select_for_update().filter(pk=first).get()
            recording.set()
            assert finish.wait(WAIT)

    held = InThread(recorder)
    assert recording.wait(WAIT)
    try:
        [rescued] = rescue.dispatchers_rescue(judge="judge", dead_after=DEAD_AFTER)
    finally:
        finish.set()
    held.join()

    assert rescued.released == 2
    assert Delivery.objects.get(pk=first).claimed_until > utcnow()
    [again] = rescue.dispatchers_rescue(judge="judge", dead_after=DEAD_AFTER)
    assert (again.declared, again.released) == (False, 1)
    row = DispatcherHeartbeat.objects.get(worker_id="gone")
    assert (row.deaths, row.released) == (1, 3)
