"""The pull upkeep against the transactions it races on real PostgreSQL: an
ack, a pull, another upkeep, each held open on a thread of its own (its own
connection), as another process would hold it.

Every upkeep step here runs under a short lock_timeout: one that waited for
the other transaction's row locks, instead of passing them by, fails fast."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import transaction

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.pull import expiry
from deliveries.pull.acks import messages_ack
from deliveries.pull.leasing import messages_lease
from deliveries.pull.sessions import pull_touch, session_start
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import (
    WAIT,
    InThread,
    lock_timeout,
    wait_until_blocked_on_lock,
)
from tests.deliveries.pull.support import VISIBILITY, publish, pull_endpoint
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LOCK_TIMEOUT_MS = 2000


def held_open(work, *, done: threading.Event, finish: threading.Event):
    """A thread's body: `work` in a transaction kept open until `finish`."""

    def body():
        with transaction.atomic():
            result = work()
            done.set()
            assert finish.wait(WAIT)
        return result

    return body


def leased_message(visibility: int = VISIBILITY):
    endpoint = pull_endpoint()
    [pk] = publish(endpoint, 1)
    now = utcnow()
    [message] = messages_lease(endpoint=endpoint, limit=1, now=now)
    return endpoint, pk, message.lease_expires_at


def test_an_upkeep_passes_by_a_lease_being_acked_and_the_ack_stands():
    endpoint, pk, lease_end = leased_message()
    done, finish = threading.Event(), threading.Event()
    # The consumer's ack came in just before the lease's end, by its clock;
    # the dispatcher's clock already says the lease is over.
    ack = InThread(
        held_open(
            lambda: messages_ack(
                endpoint=endpoint, ids=[pk], now=lease_end - timedelta(seconds=1)
            ),
            done=done,
            finish=finish,
        )
    )
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        during = expiry.pull_leases_expire(now=lease_end + timedelta(seconds=1))
    finish.set()
    assert ack.join().done == [pk]
    after = expiry.pull_leases_expire(now=lease_end + timedelta(seconds=1))

    assert (during, after) == ([], [])
    assert Delivery.objects.get(pk=pk).status == "succeeded"
    assert list(Attempt.objects.values_list("outcome", flat=True)) == ["succeeded"]


def test_an_ack_that_waited_on_an_upkeep_spending_its_lease_is_rejected():
    endpoint, pk, lease_end = leased_message()
    done, finish = threading.Event(), threading.Event()
    upkeep = InThread(
        held_open(
            lambda: expiry.pull_leases_expire(now=lease_end + timedelta(seconds=1)),
            done=done,
            finish=finish,
        )
    )
    assert done.wait(WAIT)
    ack = InThread(
        lambda: messages_ack(
            endpoint=endpoint, ids=[pk], now=lease_end - timedelta(seconds=1)
        )
    )
    assert ack.connected.wait(WAIT)
    wait_until_blocked_on_lock(ack.backend_pid)
    finish.set()

    assert [x.delivery_id for x in upkeep.join()] == [pk]
    answer = ack.join()
    assert (answer.done, answer.rejected) == ([], [pk])
    assert Delivery.objects.get(pk=pk).status == "pending"
    assert list(Attempt.objects.values_list("error_kind", flat=True)) == [
        ErrorKind.LEASE_EXPIRED
    ]


def test_two_upkeeps_at_once_spend_a_lease_once():
    _, pk, lease_end = leased_message()
    later = lease_end + timedelta(seconds=1)
    done, finish = threading.Event(), threading.Event()
    first = InThread(
        held_open(
            lambda: expiry.pull_leases_expire(now=later), done=done, finish=finish
        )
    )
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        second = expiry.pull_leases_expire(now=later)
    finish.set()

    assert len(first.join()) == 1
    assert second == []
    assert expiry.pull_leases_expire(now=later) == []
    assert Attempt.objects.filter(delivery_id=pk).count() == 1


def test_a_lease_a_pull_took_over_is_not_spent_again_by_the_upkeep():
    endpoint, pk, lease_end = leased_message()
    later = lease_end + timedelta(seconds=1)
    done, finish = threading.Event(), threading.Event()
    # The consumer pulls again after the lease's end: the pull spends the
    # lost attempt itself and leases the message anew.
    pull = InThread(
        held_open(
            lambda: messages_lease(endpoint=endpoint, limit=1, now=later),
            done=done,
            finish=finish,
        )
    )
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        during = expiry.pull_leases_expire(now=later)
    finish.set()
    [again] = pull.join()
    after = expiry.pull_leases_expire(now=later)

    assert (during, after, again.attempt) == ([], [], 2)
    assert Delivery.objects.get(pk=pk).status == "delivering"
    assert Attempt.objects.filter(delivery_id=pk).count() == 1


def test_a_session_whose_pull_is_being_recorded_is_not_ended():
    session = session_start(merchant=factories.merchant(), now=utcnow())
    now = utcnow()
    EndpointHealth.objects.filter(endpoint_id=session.pk).update(
        session_expires_at=now - timedelta(seconds=1)
    )
    done, finish = threading.Event(), threading.Event()
    # A pull lands as the session's time runs out: its touch holds the health
    # row, and moves the session's end on when it commits.
    touch = InThread(
        held_open(
            lambda: pull_touch(endpoint=session, now=now), done=done, finish=finish
        )
    )
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        during = expiry.sessions_expire(now=now)
    finish.set()
    touch.join()
    after = expiry.sessions_expire(now=now)

    assert (during, after) == ([], [])
    assert Endpoint.objects.get(pk=session.pk).is_active


def test_a_trim_passes_by_messages_a_pull_is_leasing():
    session = session_start(merchant=factories.merchant(), now=utcnow())
    start = utcnow()
    for n in range(4):
        publish(session, 1, now=start + timedelta(milliseconds=n))
    ids = list(
        Delivery.objects.filter(endpoint=session)
        .order_by("created_at")
        .values_list("pk", flat=True)
    )
    done, finish = threading.Event(), threading.Event()
    # A pull's transaction holding the oldest row, about to lease it.
    pull = InThread(
        held_open(
            lambda: list(
                Delivery.objects.select_for_update().filter(pk=ids[0]).values("pk")
            ),
            done=done,
            finish=finish,
        )
    )
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        trimmed = expiry.backlogs_trim(now=utcnow(), bound=2)
    finish.set()
    pull.join()

    assert trimmed == {session.pk: 2}
    assert dict(
        Delivery.objects.filter(endpoint=session).values_list("pk", "status")
    ) == {ids[0]: "pending", ids[1]: "dead", ids[2]: "dead", ids[3]: "pending"}
