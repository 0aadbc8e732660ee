"""A backlog trim against an ack of the head of an ordered lane, each in a
transaction of its own (its own connection), on real PostgreSQL.

The trim takes the lanes' locks before their rows, as every write to a lane
does (deliveries/lanes.py): an ack of the lane's head then decides which
waiting row comes next only after the trim committed, and so never picks a
row the trim killed (which stalled the lane: review 43)."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from deliveries.models import Delivery
from deliveries.pull import expiry
from deliveries.pull.acks import messages_ack
from deliveries.pull.leasing import messages_lease
from deliveries.pull.sessions import session_start
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import (
    WAIT,
    InThread,
    wait_until_blocked_on_lock,
)
from tests.deliveries.pull.support import publish, statuses
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def ordered_session_with_a_leased_head() -> tuple[Endpoint, list[str]]:
    """A session with one lane of three: its head leased to a consumer, two
    waiting behind it. The lane's ids in lane order."""
    session = session_start(merchant=factories.merchant(), now=utcnow())
    Endpoint.objects.filter(pk=session.pk).update(ordered=True)
    session = Endpoint.objects.select_related("merchant").get(pk=session.pk)
    for _ in range(3):
        publish(session, 1, key="K")
    lane = list(
        Delivery.objects.filter(endpoint=session)
        .order_by("lane_seq")
        .values_list("pk", flat=True)
    )
    [leased] = messages_lease(endpoint=session, limit=10, now=utcnow())
    assert leased.id == lane[0]
    return session, lane


def held_open(work, *, done: threading.Event, finish: threading.Event):
    def body():
        with transaction.atomic():
            result = work()
            done.set()
            assert finish.wait(WAIT)
        return result

    return body


def trim_one(session: Endpoint):
    return lambda: expiry._trim(
        merchant_id=session.merchant_id,
        endpoint_id=session.pk,
        excess=1,
        now=utcnow(),
    )


def test_an_ack_of_the_head_waits_for_a_trim_of_the_row_behind_it():
    session, (head, first, second) = ordered_session_with_a_leased_head()
    done, finish = threading.Event(), threading.Event()
    # The upkeep trims the oldest waiting row and has not committed yet.
    trim = InThread(held_open(trim_one(session), done=done, finish=finish))
    assert done.wait(WAIT)
    # The consumer acks the head: the lane's next row is to be chosen.
    ack = InThread(lambda: messages_ack(endpoint=session, ids=[head], now=utcnow()))
    assert ack.connected.wait(WAIT)
    wait_until_blocked_on_lock(ack.backend_pid)
    finish.set()

    assert trim.join() == 1
    assert ack.join().done == [head]
    assert statuses(session) == {head: "succeeded", first: "dead", second: "pending"}
    [message] = messages_lease(endpoint=session, limit=10, now=utcnow())
    assert message.id == second


def test_a_trim_waits_for_an_ack_of_the_head_and_trims_the_new_head():
    session, (head, first, second) = ordered_session_with_a_leased_head()
    done, finish = threading.Event(), threading.Event()
    # The ack has made the next row the head and has not committed yet.
    ack = InThread(
        held_open(
            lambda: messages_ack(endpoint=session, ids=[head], now=utcnow()),
            done=done,
            finish=finish,
        )
    )
    assert done.wait(WAIT)
    trim = InThread(trim_one(session))
    assert trim.connected.wait(WAIT)
    wait_until_blocked_on_lock(trim.backend_pid)
    finish.set()

    assert ack.join().done == [head]
    assert trim.join() == 1
    # The oldest row left, the head the ack promoted, went; the lane goes on.
    assert statuses(session) == {head: "succeeded", first: "dead", second: "pending"}
