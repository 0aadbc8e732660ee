"""Maintenance runs while sends are in flight; the heartbeat is a thread of its
own that tells the send loop what the judges wrote on its row."""

from __future__ import annotations

import os
import queue
import socket
import threading
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from deliveries.dispatch import claiming
from deliveries.dispatch.heartbeat import Heartbeat, beat_interval, heartbeat_touch
from deliveries.dispatch.maintenance import Maintenance
from deliveries.models import Delivery, DispatcherHeartbeat
from deliveries.services import event_publish
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_dispatcher import make_dispatcher
from tests.support import factories
from tests.support.fakes import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_maintenance_runs_while_a_send_is_in_flight(receiver):
    in_flight = threading.Event()
    beat_while_sending = threading.Event()
    released_by_beat = []

    def respond(_request):
        in_flight.set()
        # The receiver holds the send open until maintenance has run; a
        # dispatcher that maintains only when idle never lets it go.
        released_by_beat.append(beat_while_sending.wait(timeout=5))
        return Reply()

    def step(now):
        if in_flight.is_set():
            beat_while_sending.set()

    receiver.respond = respond
    endpoint = factories.endpoint(url=receiver.url)
    event_publish(merchant=endpoint.merchant, type="a", data={})

    make_dispatcher(maintenance=Maintenance(step)).run(drain=True)

    assert released_by_beat == [True]


def test_run_dispatcher_leaves_no_heartbeat_after_a_clean_stop():
    factories.endpoint()
    call_command(
        "run_dispatcher", "--drain", "--worker-id", "w-clean", stdout=StringIO()
    )
    assert not DispatcherHeartbeat.objects.exists()


@pytest.mark.postgres  # what another connection sees once a thread commits
@pytest.mark.django_db(transaction=False)
def test_a_clean_stop_removes_the_row_outside_the_caller_s_transaction():
    # The beat commits on the heartbeat's own connection; a removal made on
    # the caller's connection would roll back with the caller's transaction
    # (this test's) and leave a stale dispatcher behind for everyone else.
    heartbeat = Heartbeat(worker_id="w-inside", dead_after=20, judge=False)
    heartbeat.start()
    assert _committed_rows("w-inside", present=True) == ["w-inside"]

    heartbeat.stop()

    assert _committed_rows("w-inside", present=False) == []


def _committed_rows(worker_id: str, *, present: bool) -> list[str]:
    """What another connection sees of the row, waiting (bounded) for it to
    appear or go."""
    seen: list[str] = []

    def read():
        from django.db import connection as own

        try:
            for _ in range(200):
                seen[:] = DispatcherHeartbeat.objects.filter(
                    worker_id=worker_id
                ).values_list("worker_id", flat=True)
                if bool(seen) == present:
                    return
                threading.Event().wait(0.05)
        finally:
            own.close()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    return list(seen)


def test_a_beat_tells_the_send_loop_and_a_judge_s_marks_read_back_as_revoked():
    liveness = queue.SimpleQueue()
    heartbeat = Heartbeat(worker_id="w1", dead_after=20, liveness=liveness, judge=False)

    assert heartbeat.beat_once()
    assert liveness.get_nowait().revoked is False
    # What a judge writes when it declares w1 dead (rescue.py).
    DispatcherHeartbeat.objects.filter(worker_id="w1").update(deaths=1, released=3)
    assert heartbeat.beat_once()
    assert liveness.get_nowait().revoked is True
    assert heartbeat.beat_once()
    assert liveness.get_nowait().revoked is False


def test_the_beat_is_stamped_with_the_database_clock_not_the_callers():
    heartbeat_touch(worker_id="w1", now=utcnow() - timedelta(days=3))
    beat = heartbeat_touch(worker_id="w1")
    assert abs((beat.at - utcnow()).total_seconds()) < 60
    assert DispatcherHeartbeat.objects.get().last_seen_at == beat.at


# Any origin serves this pure state table; a calendar date would put the file
# in make test's shifted-clock pass, where the beats' database clock (by
# design not the process's) disagrees with the shifted utcnow() a year apart.
T0 = datetime.fromtimestamp(0, tz=UTC)


@pytest.mark.parametrize(
    ("beats", "judges"),
    [
        ([0], False),  # just connected: it has seen nobody beat yet
        ([0, 5, 10, 15], False),
        ([0, 5, 10, 15, 20], True),  # beaten steadily for the threshold
        ([0, 5, 10, 25, 30], False),  # a gap (freeze, silent outage) restarts it
        ([0, 5, 10, 25, 30, 35, 40, 45], True),
        ([0, 5, None, 10, 15, 20, 25], False),  # a failed beat restarts it
        ([0, 5, None, 10, 15, 20, 25, 30], True),
    ],
)
def test_a_judge_judges_only_after_beating_without_a_break_for_the_threshold(
    beats, judges
):
    heartbeat = Heartbeat(worker_id="w1", dead_after=20)
    due = False
    for at in beats:
        if at is None:
            heartbeat._steady_since = None  # what a failed beat does
            continue
        heartbeat._steady(T0 + timedelta(seconds=at))
        due = heartbeat._judge_due(T0 + timedelta(seconds=at))
    assert due is judges


@pytest.mark.parametrize(("dead_after", "every"), [(20, 5), (30, 5), (3, 0.75)])
def test_four_beats_fit_in_the_dead_threshold(dead_after, every):
    assert beat_interval(dead_after) == every


def predecessor_held(*, seen_ago: float) -> list[str]:
    """Rows claimed under worker id `w` by another process, last seen `seen_ago`."""
    endpoint = factories.endpoint()
    before = utcnow() - timedelta(seconds=seen_ago + 1)
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=before)
    claim = claiming.claim_batch(worker_id="w", now=before, lease_seconds=600, limit=1)
    heartbeat_touch(worker_id="w", now=utcnow() - timedelta(seconds=seen_ago))
    DispatcherHeartbeat.objects.update(hostname="old-host", pid=1)
    return claim.delivery_ids


def due() -> set[str]:
    rows = Delivery.objects.filter(next_attempt_at__lte=utcnow())
    return set(rows.values_list("pk", flat=True))


def test_a_restart_under_the_same_worker_id_frees_what_the_gone_one_held():
    held = predecessor_held(seen_ago=60)

    assert Heartbeat(worker_id="w", dead_after=20, lease_seconds=600).beat_once()

    assert due() == set(held)
    row = DispatcherHeartbeat.objects.get()
    assert (row.hostname, row.pid) == (socket.gethostname(), os.getpid())


def test_a_live_process_sharing_the_worker_id_keeps_its_rows(caplog):
    predecessor_held(seen_ago=2)

    assert Heartbeat(worker_id="w", dead_after=20, lease_seconds=600).beat_once()

    assert due() == set()
    assert "in use by another live dispatcher (old-host, pid 1)" in caplog.text
