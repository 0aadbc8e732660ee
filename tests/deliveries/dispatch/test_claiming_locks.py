"""The claim's row locks on real PostgreSQL: threads with their own connections.

Each thread in Django has its own database connection, so a thread that holds
an open transaction holds its row locks exactly as another dispatcher would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection

from deliveries.dispatch import claiming, single_claims
from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LEASE = 60.0
WAIT = 10.0  # seconds any thread may wait on another before the test fails


def publish(count: int, *, endpoint=None) -> list[str]:
    endpoint = endpoint or factories.endpoint()
    events_publish(
        merchant=endpoint.merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(count)],
    )
    return list(Delivery.objects.filter(endpoint=endpoint).values_list("id", flat=True))


class InThread:
    """Run a function on its own thread (so its own connection) and keep the result."""

    def __init__(self, target: Callable) -> None:
        self.result = None
        self.error: BaseException | None = None
        self.backend_pid: int | None = None
        self.connected = threading.Event()

        def body() -> None:
            try:
                connection.ensure_connection()
                self.backend_pid = connection.connection.info.backend_pid
                self.connected.set()
                self.result = target()
            except BaseException as exc:  # noqa: BLE001 - re-raised in join()
                self.error = exc
            finally:
                self.connected.set()
                connection.close()

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def join(self):
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "thread still blocked"
        if self.error is not None:
            raise self.error
        return self.result


@contextmanager
def lock_timeout(ms: int):
    """Make a blocked lock fail fast on this connection instead of hanging."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = {int(ms)}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")


def wait_until_blocked_on_lock(pid: int) -> None:
    """Poll pg_stat_activity until backend `pid` waits for a row lock."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
            )
            row = cursor.fetchone()
        if row and row[0] == "Lock":
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for a lock")


def test_a_claimer_skips_rows_another_transaction_has_locked():
    ids = publish(8)
    locked = threading.Event()
    finish = threading.Event()

    def recorder() -> list[str]:
        # A recorder (or a probe claim) holding five of the rows.
        from django.db import transaction

        with transaction.atomic():
            held = list(
                Delivery.objects.select_for_update()
                .order_by("next_attempt_at", "id")
                .values_list("id", flat=True)[:5]
            )
            locked.set()
            assert finish.wait(WAIT)
        return held

    a = InThread(recorder)
    assert locked.wait(WAIT)
    try:
        with lock_timeout(2000):
            b = claiming.claim_batch(
                worker_id="B", now=utcnow(), lease_seconds=LEASE, limit=8
            )
    finally:
        finish.set()
    held = a.join()

    assert len(b.delivery_ids) == 3
    assert set(held).isdisjoint(b.delivery_ids)
    assert set(held) | set(b.delivery_ids) == set(ids)


def claim_held_open(name: str, *, limit: int, locked, finish) -> Callable:
    def run() -> claiming.Claim:
        # claim_batch inside an outer transaction: its atomic becomes a
        # savepoint, so its locks and uncommitted claims stay until commit.
        from django.db import transaction

        with transaction.atomic():
            claim = claiming.claim_batch(
                worker_id=name, now=utcnow(), lease_seconds=LEASE, limit=limit
            )
            locked.set()
            assert finish.wait(WAIT)
        return claim

    return run


def test_a_second_claim_skips_an_endpoint_another_claim_is_counting():
    ids = publish(8)
    locked, finish = threading.Event(), threading.Event()
    a = InThread(claim_held_open("A", limit=5, locked=locked, finish=finish))
    assert locked.wait(WAIT)
    try:
        with lock_timeout(2000):  # a claim that waited would fail here
            during = claiming.claim_batch(
                worker_id="B", now=utcnow(), lease_seconds=LEASE, limit=5
            )
    finally:
        finish.set()
    a_claim = a.join()
    after = claiming.claim_batch(
        worker_id="B", now=utcnow(), lease_seconds=LEASE, limit=5
    )

    assert (len(a_claim.delivery_ids), during.delivery_ids) == (5, [])
    assert during.contended == 1
    assert sorted(a_claim.delivery_ids + after.delivery_ids) == sorted(ids)


def test_max_in_flight_holds_for_two_claims_made_at_the_same_moment():
    # Without the advisory lock (its merchant's, which covers the endpoint),
    # B would count A's claims before A commits, see none, and take four
    # more: eight in flight.
    endpoint = factories.endpoint(max_in_flight=4)
    publish(12, endpoint=endpoint)
    locked, finish = threading.Event(), threading.Event()
    a = InThread(claim_held_open("A", limit=10, locked=locked, finish=finish))
    assert locked.wait(WAIT)
    b_locked = threading.Event()
    b = InThread(claim_held_open("B", limit=10, locked=b_locked, finish=finish))
    assert b_locked.wait(WAIT)  # B claimed while A's claim was still open
    finish.set()
    claims = [a.join(), b.join()]
    later = claiming.claim_batch(
        worker_id="C", now=utcnow(), lease_seconds=LEASE, limit=10
    )

    assert sum(len(c.delivery_ids) for c in claims) == 4
    assert later.delivery_ids == []
    assert Delivery.objects.filter(status="delivering").count() == 4


def test_an_expired_lease_is_reclaimed_and_a_live_one_is_not():
    expired_id, live_id = publish(2)
    now = utcnow()
    Delivery.objects.filter(pk=expired_id).update(
        status="delivering",
        claimed_by="dead-worker",
        claimed_until=now - timedelta(seconds=1),
        next_attempt_at=now - timedelta(seconds=1),
    )
    Delivery.objects.filter(pk=live_id).update(
        status="delivering",
        claimed_by="live-worker",
        claimed_until=now + timedelta(seconds=30),
        next_attempt_at=now + timedelta(seconds=30),
    )

    claim = claiming.claim_batch(worker_id="B", now=now, lease_seconds=LEASE, limit=5)

    assert claim.delivery_ids == [expired_id]
    assert claim.reclaimed == 1
    reclaimed = Delivery.objects.get(pk=expired_id)
    assert (reclaimed.claimed_by, reclaimed.attempt_count) == ("B", 1)
    lost = Attempt.objects.get(delivery_id=expired_id)
    assert (lost.error_kind, lost.worker_id) == ("lease_expired", "dead-worker")
    assert Delivery.objects.get(pk=live_id).claimed_by == "live-worker"
    assert not Attempt.objects.filter(delivery_id=live_id).exists()


def test_only_one_of_two_concurrent_claimers_wins_the_probe(monkeypatch):
    endpoint = factories.endpoint()
    publish(4, endpoint=endpoint)
    now = utcnow()
    EndpointHealth.objects.filter(endpoint=endpoint).update(
        breaker_state="open",
        opened_at=now - timedelta(seconds=600),
        next_probe_at=now - timedelta(seconds=1),
    )
    start = threading.Barrier(2, timeout=WAIT)
    first_took = threading.Event()
    holder: list[int] = []
    go_on = threading.Event()
    take = single_claims.rows_take

    def take_and_hold(rows, **kwargs):
        # The first winner pauses inside its claim transaction, so the other
        # claimer runs its conditional UPDATE while the winner's is uncommitted.
        taken = take(rows, **kwargs)
        if not first_took.is_set():
            holder.append(threading.get_ident())
            first_took.set()
            assert go_on.wait(WAIT)
        return taken

    monkeypatch.setattr(single_claims, "rows_take", take_and_hold)

    def claimer(name: str) -> Callable[[], claiming.Claim]:
        def run() -> claiming.Claim:
            start.wait()
            return single_claims.claim_probes(
                worker_id=name, now=now, lease_seconds=LEASE
            )

        return run

    threads = [InThread(claimer("A")), InThread(claimer("B"))]
    assert first_took.wait(WAIT)
    for thread in threads:
        thread.connected.wait(WAIT)
    # The other claimer has reached the health row and waits for its lock.
    other = next(t for t in threads if t.thread.ident != holder[0])
    wait_until_blocked_on_lock(other.backend_pid)
    go_on.set()
    claims = [t.join() for t in threads]

    probes = [p for c in claims for p in c.probe_ids]
    assert len(probes) == 1
    assert sum(len(c.delivery_ids) for c in claims) == 1
    health = EndpointHealth.objects.get(endpoint=endpoint)
    assert (health.breaker_state, health.probe_delivery_id) == ("half_open", probes[0])
