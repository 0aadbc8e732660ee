"""A dispatcher stopped in the middle of a claim holds its merchants' locks
only until PostgreSQL's idle-in-transaction timeout ends its session.

tests/acceptance/test_stuck_and_frozen.py freezes a whole dispatcher with
SIGSTOP at random moments; it failed once in CI (the other two sent nothing
for 9.5 s of a 10 s freeze) when the freeze fell between two statements of a
pipeline (together.py): PostgreSQL starts the timeout only once it has
answered a pipeline's Sync, so a claim stopped after its lock statement went
out, but before the Sync, kept the merchant's lock for the whole freeze.
Here the stop is placed there on purpose: a thread (its own connection, as
another dispatcher) is held right after the lock statement is sent, and
another claim must get the merchant's rows once the timeout has passed.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from deliveries.dispatch import claiming, load_sql
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TIMEOUT_MS = 500  # the stopped session's idle-in-transaction timeout
WAIT = 10.0  # seconds any step may take before the test fails


class StopsAtTheCount:
    """load_sql, except that reading LIVE (the count that follows the
    merchants' locks) on the stopped thread waits until released."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None  # set once it is made
        self.reached = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str):
        if name == "LIVE" and threading.current_thread() is self.thread:
            self.reached.set()
            self.release.wait(WAIT)
        return getattr(load_sql, name)


def test_a_claim_stopped_after_its_locks_lets_them_go_at_the_timeout(monkeypatch):
    endpoint = factories.endpoint()
    events_publish(
        merchant=endpoint.merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(3)],
    )
    stop = StopsAtTheCount()
    monkeypatch.setattr(claiming, "load_sql", stop)
    errors: list[BaseException] = []

    def stopped_claim() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SET idle_in_transaction_session_timeout = {TIMEOUT_MS}"
                )
            claiming.claim_batch(
                worker_id="stopped", now=utcnow(), lease_seconds=60, limit=10
            )
        except BaseException as exc:  # noqa: BLE001 - its session is ended under it
            errors.append(exc)
        finally:
            connection.close()

    stop.thread = threading.Thread(target=stopped_claim)
    stop.thread.start()
    try:
        assert stop.reached.wait(WAIT), (
            f"the stopped claim never took its locks: {errors}"
        )
        time.sleep(3 * TIMEOUT_MS / 1000)

        claim = claiming.claim_batch(
            worker_id="other", now=utcnow(), lease_seconds=60, limit=10
        )
    finally:
        stop.release.set()
        stop.thread.join(WAIT)

    assert not stop.thread.is_alive()
    # Its session was ended by the timeout; nothing it began was kept.
    assert errors, "the stopped claim's session outlived its timeout"
    assert len(claim.delivery_ids) == 3, (
        "the stopped claim still held the merchant's lock past its timeout"
    )
    assert set(Delivery.objects.values_list("claimed_by", flat=True)) == {"other"}
