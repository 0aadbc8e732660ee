"""Issue 12's locks, one at a time, on real PostgreSQL.

Each test opens a first transaction that has done its work and holds it open,
starts a second one on its own thread (its own connection) doing the same
thing, waits until the second is blocked on a lock (or has finished, which is
what happens when the protection is gone), then commits the first. Exactly
one of them may act. The end-to-end version, with two dispatcher processes,
is tests/acceptance/test_maintenance_race.py; there the layers cover for each
other, so each layer is proved here on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, models, transaction

from deliveries.models import Attempt, Delivery, Event
from deliveries.notifications import policy
from deliveries.notifications.deadletters import SLOT as DEAD_LETTERS_SLOT
from deliveries.notifications.deadletters import (
    dead_letters_announce,
    dead_letters_collect,
)
from deliveries.notifications.mail import _claim, outbox_drain
from deliveries.notifications.models import (
    EndpointWatch,
    Kind,
    MaintenanceSlot,
    OutgoingEmail,
)
from deliveries.notifications.operational import (
    DELIVERY_DEAD,
    ENDPOINT_FAILING,
    operational_merchant,
)
from deliveries.notifications.step import CHECK_SLOT, slot_take
from deliveries.notifications.watch import WatchReport, watch_endpoint
from endpoints.models import Endpoint, Membership
from endpoints.services import endpoint_disable
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread
from tests.deliveries.notifications.conftest import T0, attempt, failures, hours
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THRESHOLDS = policy.Thresholds(window=hours(120), min_failures=20)


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.OPERATIONAL_COALESCE_SECONDS = 60
    settings.NOTIFY_EMAIL_MIN_INTERVAL_HOURS = 24
    MaintenanceSlot.objects.all().delete()


@pytest.fixture
def endpoint(transactional_db):
    merchant = factories.merchant("acme")
    owner = User.objects.create_user("olivia", email="olivia@acme.test")
    Membership.objects.create(user=owner, merchant=merchant, role="owner")
    factories.endpoint(operational_merchant(), url="http://127.0.0.1:9/ops")
    return factories.endpoint(merchant, url="http://127.0.0.1:9/acme")


def blocked_or_done(worker: InThread) -> None:
    """Until the worker's backend waits for a lock, or the worker has finished."""
    assert worker.connected.wait(WAIT)
    deadline = time.monotonic() + WAIT
    while worker.thread.is_alive() and time.monotonic() < deadline:
        with connection.cursor() as cursor:
            # Inside the gate's transaction pg_stat_activity is a snapshot.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                [worker.backend_pid],
            )
            row = cursor.fetchone()
        if row and row[0] == "Lock":
            return
        time.sleep(0.01)
    assert not worker.thread.is_alive(), "the second transaction neither waited nor ran"


def race(first: Callable, second: Callable) -> tuple:
    """first in a transaction held open while second runs; both results."""
    done, finish = threading.Event(), threading.Event()

    def held_open():
        with transaction.atomic():  # first's own atomic becomes a savepoint
            result = first()
            done.set()
            assert finish.wait(WAIT)
        return result

    a = InThread(held_open)
    try:
        assert done.wait(WAIT), "the first transaction did not finish its work"
        b = InThread(second)
        blocked_or_done(b)
    finally:
        finish.set()
    return a.join(), b.join()


def wait_blocked(worker: InThread) -> None:
    assert worker.connected.wait(WAIT)
    blocked_or_done(worker)
    assert worker.thread.is_alive(), "the first transaction did not wait at the gate"


def race_at_gate(table: type[models.Model], first: Callable, second: Callable) -> tuple:
    """first stopped on a read of `table` (the test holds it locked), after it
    has locked what it protects and before it writes; second runs meanwhile;
    then the gate opens: a slow query in the first, made certain.

    This is the interleaving where only the lock helps: the first has not yet
    written the row, so nothing else would make the second wait.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"LOCK TABLE {table._meta.db_table} IN ACCESS EXCLUSIVE MODE"
            )
        a = InThread(first)
        wait_blocked(a)
        b = InThread(second)
        blocked_or_done(b)
    return a.join(), b.join()


def test_the_maintenance_slot_is_won_once_by_two_at_the_same_moment():
    # Without the "due" condition (last_run_at older than `every`) the second
    # UPDATE, once the first commits, moves the slot again and runs the check too.
    every = timedelta(seconds=60)
    now = T0 + hours(1)
    MaintenanceSlot.objects.create(name=CHECK_SLOT)  # only the row lock orders them
    first, second = race(
        lambda: slot_take(name=CHECK_SLOT, now=now, every=every),
        lambda: slot_take(name=CHECK_SLOT, now=now + timedelta(seconds=1), every=every),
    )
    assert (first, second) == (True, False)
    assert slot_take(name=CHECK_SLOT, now=now + every, every=every)


def test_two_checks_of_one_endpoint_say_failing_once_and_email_once(endpoint):
    # Without the lock on the endpoint's watch row, the second check reads the
    # flags before the first has saved them and says "failing" (and queues an
    # email) again. The gate: the attempts, read after locking the watch.
    failures(endpoint, start=T0, end=T0 + hours(40), count=10)
    EndpointWatch.objects.create(endpoint=endpoint)
    now = T0 + hours(61)

    def check():
        return watch_endpoint(endpoint.pk, now=now, t=THRESHOLDS, report=WatchReport())

    race_at_gate(Attempt, check, check)

    failing = Event.objects.filter(type=ENDPOINT_FAILING)
    assert [e.data["trigger"] for e in failing] == ["no_success_50"]
    assert OutgoingEmail.objects.filter(kind=Kind.FAILING).count() == 1


def test_a_staff_disable_in_between_is_not_overwritten_by_auto_disable(endpoint):
    # The auto-disable UPDATE is conditional on is_active: without that, it
    # waits for the staff disable to commit, then writes over who and why.
    failures(endpoint, start=T0, end=T0 + hours(100), count=25)

    def staff():
        endpoint_disable(
            endpoint=Endpoint.objects.get(pk=endpoint.pk),
            reason="moving servers",
            by="staff:bob",
            now=T0 + hours(120),
        )

    def check():
        report = WatchReport()
        watch_endpoint(endpoint.pk, now=T0 + hours(121), t=THRESHOLDS, report=report)
        return report.disabled

    _, auto_disabled = race(staff, check)

    endpoint.refresh_from_db()
    assert (endpoint.disabled_by, endpoint.disabled_reason) == (
        "staff:bob",
        "moving servers",
    )
    assert auto_disabled == []


def dead_letters(endpoint: Endpoint, count: int) -> None:
    for _ in range(count):
        attempt(endpoint, T0)
    Delivery.objects.filter(endpoint=endpoint).update(
        status=Delivery.Status.DEAD, dead_at=T0, last_error="HTTP 500"
    )


def test_two_collectors_count_each_dead_letter_once(endpoint):
    # Without the lock on the dead-letters slot, the second collector reads the
    # watermark before the first has moved it and counts the same dead letters
    # again. The gate: the deliveries, read after locking the slot.
    dead_letters(endpoint, 5)
    EndpointWatch.objects.create(endpoint=endpoint)
    MaintenanceSlot.objects.create(name=DEAD_LETTERS_SLOT)  # only the lock orders them
    now = T0 + timedelta(seconds=10)

    def collect():
        return dead_letters_collect(now=now)

    first, second = race_at_gate(Delivery, collect, collect)

    assert (first, second) == (5, 0)
    assert EndpointWatch.objects.get(pk=endpoint.pk).dead_count == 5


def test_two_announcers_send_one_delivery_dead(endpoint):
    # Without the lock on the watch row, the second announcer reads a count the
    # first has not yet cleared and publishes relay.delivery.dead again.
    dead_letters(endpoint, 5)
    dead_letters_collect(now=T0 + timedelta(seconds=10))
    now = T0 + timedelta(seconds=90)

    first, second = race(
        lambda: dead_letters_announce(now=now), lambda: dead_letters_announce(now=now)
    )

    assert (first, second) == ([endpoint.pk], [])
    said = Event.objects.filter(type=DELIVERY_DEAD)
    assert [e.data["count"] for e in said] == [5]


def test_an_email_claimed_by_one_drain_is_not_sent_by_another(endpoint):
    # Without the row lock in the claim, the second drain reads the row before
    # the first claim commits, then sends the same email a second time.
    now = T0
    OutgoingEmail.objects.create(
        kind=Kind.FAILING,
        merchant=endpoint.merchant,
        endpoint=endpoint,
        context={"merchant": "acme", "endpoint": {"id": endpoint.pk, "url": "u"}},
        created_at=now,
        send_after=now,
    )
    sent = []

    claimed, sent_by_second = race(
        lambda: _claim(now),
        lambda: outbox_drain(now=lambda: now, send=sent.append),
    )

    assert claimed is not None
    assert (sent_by_second, sent) == (0, [])
