"""Ended listen sessions a merchant keeps are bounded (sessions.py,
LISTEN_KEEP_ENDED_MAX): a start past the bound deletes the oldest ended ones,
a few at a time, so a key that starts and ends sessions in a loop cannot
grow endpoint rows without bound while the upkeep deletes only a few a
second. And the two deleters (a start, the upkeep) never wait on each other."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import transaction

from deliveries.models import Delivery
from deliveries.pull import expiry, sessions
from deliveries.pull.sessions import session_end, session_start
from endpoints.models import Endpoint, Merchant
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread, lock_timeout
from tests.deliveries.pull.support import publish
from tests.support import factories

BOUND = sessions.LISTEN_KEEP_ENDED_MAX
PER_START = sessions.ENDED_DELETES_PER_START
LOCK_TIMEOUT_MS = 2000


def ended_sessions(merchant: Merchant, count: int) -> list[str]:
    """`count` sessions started together and ended one a second apart, the
    first the oldest; no start meets more than BOUND ended ones."""
    Merchant.objects.filter(pk=merchant.pk).update(max_endpoints=count + 10)
    start = utcnow()
    started = [session_start(merchant=merchant, now=start) for _ in range(count)]
    for n, session in enumerate(started):
        session_end(
            endpoint=session, why="stopped", now=start + timedelta(seconds=n + 1)
        )
    return [s.pk for s in started]


def kept(merchant: Merchant) -> set[str]:
    return set(
        Endpoint.objects.filter(
            merchant=merchant, listen_session=True, is_active=False
        ).values_list("pk", flat=True)
    )


@pytest.mark.postgres
def test_sessions_started_and_ended_in_a_loop_do_not_pile_up(scoped, merchant):
    """The review's churn probe: a quota of one, 50 sessions in a row."""
    Merchant.objects.filter(pk=merchant.pk).update(max_endpoints=1)
    base = "/merchants/acme/listen-sessions"
    for _ in range(50):
        response = scoped.post(base, {})
        assert response.status_code == 201, response.content
        assert scoped.delete(f"{base}/{response.json()['id']}").status_code == 204

    # The bound, and the one that ended after the last start pruned.
    assert Endpoint.objects.filter(merchant=merchant).count() == BOUND + 1


@pytest.mark.django_db
@pytest.mark.both_backends
def test_a_start_deletes_the_oldest_ended_sessions_a_few_at_a_time():
    merchant = factories.merchant()
    ids = ended_sessions(merchant, BOUND + 5)
    publish(Endpoint.objects.select_related("merchant").get(pk=ids[0]), 2)

    live = session_start(merchant=merchant, now=utcnow())

    assert kept(merchant) == set(ids[PER_START:])
    assert not Delivery.objects.filter(endpoint_id=ids[0]).exists()
    session_start(merchant=merchant, now=utcnow())
    session_start(merchant=merchant, now=utcnow())
    assert kept(merchant) == set(ids[5:])  # the bound, and no further
    assert Endpoint.objects.get(pk=live.pk).is_active


@pytest.mark.django_db
@pytest.mark.both_backends
def test_a_start_within_the_bound_deletes_nothing():
    merchant = factories.merchant()
    ids = ended_sessions(merchant, BOUND)

    session_start(merchant=merchant, now=utcnow())

    assert kept(merchant) == set(ids)


@pytest.mark.django_db
@pytest.mark.both_backends
def test_another_merchants_ended_sessions_are_not_counted_nor_deleted():
    merchant, other = factories.merchant(), factories.merchant()
    theirs = ended_sessions(other, BOUND + 3)

    session_start(merchant=merchant, now=utcnow())

    assert kept(other) == set(theirs)


def holding(endpoint_id: str, *, done: threading.Event, finish: threading.Event):
    """Another deleter's transaction: the session's row locked, as a start's
    prune or the upkeep's delete locks it before deleting."""

    def body():
        with transaction.atomic():
            list(
                Endpoint.objects.select_for_update(of=("self",))
                .filter(pk=endpoint_id)
                .order_by()
            )
            done.set()
            assert finish.wait(WAIT)

    return body


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_start_passes_by_an_ended_session_another_deleter_holds():
    merchant = factories.merchant()
    ids = ended_sessions(merchant, BOUND + 5)
    done, finish = threading.Event(), threading.Event()
    other = InThread(holding(ids[0], done=done, finish=finish))
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        session_start(merchant=merchant, now=utcnow())
    finish.set()
    other.join()

    assert kept(merchant) == {ids[0], *ids[1 + PER_START :]}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_upkeep_passes_by_an_ended_session_a_start_is_deleting():
    merchant = factories.merchant()
    [old] = ended_sessions(merchant, 1)
    long_after = utcnow() + timedelta(
        seconds=expiry.settings.LISTEN_KEEP_ENDED_SECONDS + 60
    )
    done, finish = threading.Event(), threading.Event()
    other = InThread(holding(old, done=done, finish=finish))
    assert done.wait(WAIT)

    with lock_timeout(LOCK_TIMEOUT_MS):
        during = expiry.ended_sessions_delete(now=long_after)
    finish.set()
    other.join()

    assert during == []
    assert expiry.ended_sessions_delete(now=long_after) == [old]
