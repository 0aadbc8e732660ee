"""Ordered lanes on real PostgreSQL: who is a head, who waits, who goes on.

The races open a second transaction on purpose: the first holds its
transaction open until the second is seen waiting for the lane's lock (or
has finished without waiting, which is the bug these tests catch).
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from deliveries.lanes import lanes_advance
from deliveries.models import Delivery
from deliveries.replay import deliveries_replay_dead, delivery_replay
from deliveries.services import EventInput, event_publish, events_publish
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread
from tests.support import factories
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def lane(endpoint, key="order-1") -> list[tuple[str, int, int]]:
    """(status, lane_seq, the event's n) of a lane's rows, in lane order."""
    return [
        (d.status, d.lane_seq, d.event.data["n"])
        for d in Delivery.objects.filter(endpoint=endpoint, ordering_key=key)
        .select_related("event")
        .order_by("lane_seq")
    ]


def test_the_first_event_of_a_key_is_the_head_and_the_rest_wait_in_publish_order():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    unordered = factories.endpoint(merchant)
    events_publish(
        merchant=merchant,
        events=[
            EventInput("order.paid", {"n": n}, ordering_key="order-1") for n in range(4)
        ],
    )
    event_publish(
        merchant=merchant, type="order.paid", data={"n": 4}, ordering_key="order-1"
    )

    assert lane(ordered) == [
        ("pending", 1, 0),
        ("waiting", 2, 1),
        ("waiting", 3, 2),
        ("waiting", 4, 3),
        ("waiting", 5, 4),
    ]
    # Unordered endpoints and keyless events are as before: all pending, no lane.
    assert set(
        Delivery.objects.filter(endpoint=unordered).values_list(
            "status", "ordering_key"
        )
    ) == {("pending", "")}
    event_publish(merchant=merchant, type="order.paid", data={"n": 5})
    assert Delivery.objects.get(event__data__n=5, endpoint=ordered).status == "pending"


def test_keys_are_lanes_of_their_own():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    events_publish(
        merchant=merchant,
        events=[
            EventInput("order.paid", {"n": n}, ordering_key=f"k{n % 2}")
            for n in range(4)
        ],
    )
    assert lane(ordered, "k0") == [("pending", 1, 0), ("waiting", 2, 2)]
    assert lane(ordered, "k1") == [("pending", 1, 1), ("waiting", 2, 3)]


def test_the_next_row_goes_on_only_once_the_lane_has_no_head():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    events_publish(
        merchant=merchant,
        events=[
            EventInput("order.paid", {"n": n}, ordering_key="order-1") for n in range(3)
        ],
    )
    the_lane = [(merchant.pk, ordered.pk, "order-1")]
    assert lanes_advance(lanes=the_lane, now=utcnow()) == []  # the head is there

    Delivery.objects.filter(endpoint=ordered, lane_seq=1).update(status="dead")
    promoted = lanes_advance(lanes=the_lane, now=utcnow())

    assert promoted == [Delivery.objects.get(endpoint=ordered, lane_seq=2).pk]
    assert lane(ordered) == [("dead", 1, 0), ("pending", 2, 1), ("waiting", 3, 2)]
    assert lanes_advance(lanes=the_lane * 2, now=utcnow()) == []


def test_a_lane_that_emptied_starts_again_with_a_head():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    event_publish(merchant=merchant, type="a.b", data={"n": 0}, ordering_key="k")
    Delivery.objects.update(status="succeeded")
    event_publish(merchant=merchant, type="a.b", data={"n": 1}, ordering_key="k")
    assert lane(ordered, "k") == [("succeeded", 1, 0), ("pending", 1, 1)]


# -- races ------------------------------------------------------------------


def _waiting_for_a_lock(pid: int | None) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        )
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def _race(first, second):
    """first() in a transaction held open; second() on another connection
    until it waits for a lock or ends; then first commits."""
    done, finish = threading.Event(), threading.Event()

    def held_open():
        with transaction.atomic():
            result = first()
            done.set()
            assert finish.wait(WAIT)
        return result

    a = InThread(held_open)
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
    return a.join(), b.join()


def test_two_concurrent_publishes_of_one_key_make_one_head():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)

    def publish(n):
        return lambda: event_publish(
            merchant=merchant, type="order.paid", data={"n": n}, ordering_key="k"
        )

    _race(publish(0), publish(1))

    assert lane(ordered, "k") == [("pending", 1, 0), ("waiting", 2, 1)]


def test_a_publish_racing_the_heads_record_is_promoted_by_it():
    """The publish parks its row behind a head that the record is finishing:
    the record must see the parked row once the publish commits, or the
    lane is left with rows waiting and no head."""
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    event_publish(merchant=merchant, type="a.b", data={"n": 0}, ordering_key="k")
    the_lane = [(merchant.pk, ordered.pk, "k")]

    def publish():
        return event_publish(
            merchant=merchant, type="a.b", data={"n": 1}, ordering_key="k"
        )

    def record():
        with transaction.atomic():
            Delivery.objects.filter(endpoint=ordered, lane_seq=1).update(
                status="succeeded"
            )
            return lanes_advance(lanes=the_lane, now=utcnow())

    _, promoted = _race(publish, record)

    assert lane(ordered, "k") == [("succeeded", 1, 0), ("pending", 2, 1)]
    assert promoted == [Delivery.objects.get(endpoint=ordered, lane_seq=2).pk]


def test_a_replayed_dead_letter_leaves_its_lane_marked_out_of_order():
    merchant = factories.merchant()
    ordered = factories.endpoint(merchant, ordered=True)
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}, ordering_key="k") for n in range(3)],
    )
    first, second, third = (
        Delivery.objects.get(endpoint=ordered, lane_seq=n) for n in (1, 2, 3)
    )
    Delivery.objects.filter(pk=first.pk).update(status="dead")
    lanes_advance(lanes=[(merchant.pk, ordered.pk, "k")], now=utcnow())

    replayed = delivery_replay(delivery_id=first.pk, now=utcnow())
    assert (replayed.status, replayed.ordering_key, replayed.out_of_order) == (
        "pending",
        "",
        True,
    )
    # Its outcome is no head's: the lane's real head (second) is still there.
    Delivery.objects.filter(pk=first.pk).update(status="succeeded")
    lanes_advance(lanes=[(merchant.pk, ordered.pk, "k")], now=utcnow())
    assert Delivery.objects.get(pk=third.pk).status == "waiting"

    # Bulk replay marks the same way (one UPDATE: the lane read before cleared).
    Delivery.objects.filter(pk=second.pk).update(status="dead")
    assert deliveries_replay_dead(delivery_ids=[second.pk], now=utcnow()) == 1
    second.refresh_from_db()
    assert (second.ordering_key, second.out_of_order) == ("", True)
