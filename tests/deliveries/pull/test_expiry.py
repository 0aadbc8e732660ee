"""The dispatchers' pull upkeep (deliveries/pull/expiry.py), one step at a
time with the time passed in: expired leases, idle sessions, full backlogs,
ended sessions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.models import Attempt, Counter, Delivery, ErrorKind
from deliveries.pull import expiry
from deliveries.pull.leasing import PULLED_BY, messages_lease
from deliveries.pull.sessions import ENDED_BY, session_end, session_start
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib.clock import utcnow
from tests.deliveries.pull.support import VISIBILITY, publish, pull_endpoint, statuses
from tests.support import factories

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

AFTER = timedelta(seconds=VISIBILITY + 1)  # past a lease taken at `now`


def counted(name: str, label: str = "") -> float:
    return sum(
        Counter.objects.filter(name=name, label=label).values_list("value", flat=True)
    )


def test_an_expired_lease_is_a_spent_attempt_and_the_message_is_due_at_once():
    endpoint = pull_endpoint()
    [pk] = publish(endpoint, 1)
    now = utcnow()
    messages_lease(endpoint=endpoint, limit=10, now=now)

    lost = expiry.pull_leases_expire(now=now + AFTER)

    assert lost == [expiry.Lost(pk, endpoint.pk, 1, dead=False)]
    row = Delivery.objects.get(pk=pk)
    assert (row.status, row.claimed_by, row.claimed_until) == ("pending", "", None)
    assert row.next_attempt_at == now + AFTER
    assert (row.attempt_count, row.last_error) == (1, ErrorKind.LEASE_EXPIRED)
    attempt = Attempt.objects.get(delivery_id=pk)
    assert (attempt.number, attempt.outcome, attempt.error_kind, attempt.worker_id) == (
        1,
        "retry",
        ErrorKind.LEASE_EXPIRED,
        PULLED_BY,
    )
    assert counted("reclaimed_total") == 1
    assert counted("attempts_total", "retry") == 1
    [again] = messages_lease(endpoint=endpoint, limit=10, now=now + AFTER)
    assert (again.id, again.attempt) == (pk, 2)


def test_a_lease_still_running_is_left_to_its_consumer():
    endpoint = pull_endpoint()
    publish(endpoint, 2)
    now = utcnow()
    messages_lease(endpoint=endpoint, limit=10, now=now)

    assert expiry.pull_leases_expire(now=now + timedelta(seconds=VISIBILITY - 1)) == []
    assert set(statuses(endpoint).values()) == {"delivering"}
    assert not Attempt.objects.exists()


def test_a_dispatchers_lease_is_not_a_pulled_one():
    # An HTTP delivery whose dispatcher's lease ran out is the claim's to take
    # over (claiming.rows_take), not this upkeep's.
    http = factories.endpoint()
    [pk] = publish(http, 1)
    Delivery.objects.filter(pk=pk).update(
        status="delivering", claimed_by="w1", claimed_until=utcnow()
    )

    assert expiry.pull_leases_expire(now=utcnow() + AFTER) == []
    assert Delivery.objects.get(pk=pk).status == "delivering"


def test_the_last_attempt_lost_is_a_dead_letter_and_its_lane_goes_on():
    endpoint = pull_endpoint(ordered=True, max_attempts=1)
    first, second = publish(endpoint, 2, key="order-1")
    now = utcnow()
    [leased] = messages_lease(endpoint=endpoint, limit=10, now=now)
    assert leased.id == first  # only a lane's head is handed out

    [lost] = expiry.pull_leases_expire(now=now + AFTER)

    assert lost.dead
    assert statuses(endpoint) == {first: "dead", second: "pending"}
    assert Attempt.objects.get(delivery_id=first).outcome == "dead"
    assert counted("deliveries_total", "dead") == 1
    [next_one] = messages_lease(endpoint=endpoint, limit=10, now=now + AFTER)
    assert next_one.id == second


def test_a_run_spends_at_most_its_limit_and_the_next_run_the_rest():
    endpoint = pull_endpoint()
    publish(endpoint, 5)
    now = utcnow()
    messages_lease(endpoint=endpoint, limit=10, now=now)

    assert len(expiry.pull_leases_expire(now=now + AFTER, limit=3)) == 3
    assert len(expiry.pull_leases_expire(now=now + AFTER, limit=3)) == 2
    assert set(statuses(endpoint).values()) == {"pending"}
    assert Attempt.objects.count() == 5


def _session(**kwargs) -> Endpoint:
    return session_start(merchant=factories.merchant(), now=utcnow(), **kwargs)


def _expires_at(session: Endpoint, at) -> None:
    EndpointHealth.objects.filter(endpoint_id=session.pk).update(session_expires_at=at)


def test_a_session_nobody_pulled_in_time_ends_and_its_messages_go_dead():
    idle, live = _session(), _session()
    [pk] = publish(idle, 1)
    now = utcnow()
    _expires_at(idle, now - timedelta(seconds=1))
    _expires_at(live, now + timedelta(seconds=30))

    assert expiry.sessions_expire(now=now) == [idle.pk]

    idle.refresh_from_db()
    assert (idle.is_active, idle.disabled_by) == (False, ENDED_BY)
    row = Delivery.objects.get(pk=pk)
    assert (row.status, row.last_error) == ("dead", ErrorKind.LISTEN_ENDED)
    assert Endpoint.objects.get(pk=live.pk).is_active
    assert expiry.sessions_expire(now=now) == []  # ended once


def test_a_pull_endpoint_that_is_no_session_never_expires():
    endpoint = pull_endpoint()
    _expires_at(endpoint, utcnow() - timedelta(hours=1))

    assert expiry.sessions_expire(now=utcnow()) == []
    assert Endpoint.objects.get(pk=endpoint.pk).is_active


def _publish_one_by_one(endpoint: Endpoint, count: int) -> list[str]:
    """Each a millisecond later than the last, so "oldest" has one answer."""
    start = utcnow()
    for n in range(count):
        publish(endpoint, 1, now=start + timedelta(milliseconds=n))
    return list(
        Delivery.objects.filter(endpoint=endpoint)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
    )


def test_a_full_backlog_loses_its_oldest_messages_beyond_the_bound():
    session = _session()
    ids = _publish_one_by_one(session, 5)

    assert expiry.backlogs_trim(now=utcnow(), bound=3) == {session.pk: 2}

    assert statuses(session) == {
        **{pk: "dead" for pk in ids[:2]},
        **{pk: "pending" for pk in ids[2:]},
    }
    assert set(
        Delivery.objects.filter(pk__in=ids[:2]).values_list("last_error", flat=True)
    ) == {ErrorKind.LISTEN_BACKLOG_FULL}
    assert not Attempt.objects.exists()  # never sent: no attempt spent
    assert counted("deliveries_total", "dead") == 2
    assert expiry.backlogs_trim(now=utcnow(), bound=3) == {}


def test_a_trim_leaves_the_messages_a_consumer_holds():
    session = _session()
    ids = _publish_one_by_one(session, 4)
    now = utcnow()
    messages_lease(endpoint=session, limit=1, now=now)  # the oldest, leased

    assert expiry.backlogs_trim(now=now, bound=2) == {session.pk: 2}

    assert statuses(session) == {
        ids[0]: "delivering",
        ids[1]: "dead",
        ids[2]: "dead",
        ids[3]: "pending",
    }


def test_a_trimmed_lane_head_hands_the_lane_on():
    session = _session(event_types=())
    Endpoint.objects.filter(pk=session.pk).update(ordered=True)
    session.refresh_from_db()
    start = utcnow()
    for n in range(3):
        publish(session, 1, key="k", now=start + timedelta(milliseconds=n))
    ids = list(
        Delivery.objects.filter(endpoint=session)
        .order_by("lane_seq")
        .values_list("pk", flat=True)
    )
    assert statuses(session) == {
        ids[0]: "pending",
        ids[1]: "waiting",
        ids[2]: "waiting",
    }

    assert expiry.backlogs_trim(now=utcnow(), bound=1) == {session.pk: 2}

    assert statuses(session) == {ids[0]: "dead", ids[1]: "dead", ids[2]: "pending"}


def test_a_session_ended_long_ago_is_deleted_with_its_deliveries():
    keep = timedelta(seconds=expiry.settings.LISTEN_KEEP_ENDED_SECONDS)
    now = utcnow()
    old, recent, live = _session(), _session(), _session()
    publish(old, 2)
    session_end(endpoint=old, why="stopped", now=now - keep - timedelta(seconds=1))
    session_end(endpoint=recent, why="stopped", now=now - keep + timedelta(seconds=60))

    assert expiry.ended_sessions_delete(now=now) == [old.pk]

    assert not Endpoint.objects.filter(pk=old.pk).exists()
    assert not Delivery.objects.filter(endpoint_id=old.pk).exists()
    assert set(Endpoint.objects.values_list("pk", flat=True)) >= {recent.pk, live.pk}


def test_one_run_does_every_step():
    endpoint = pull_endpoint()
    publish(endpoint, 1)
    idle = _session()
    now = utcnow()
    messages_lease(endpoint=endpoint, limit=1, now=now)
    _expires_at(idle, now)

    upkeep = expiry.pull_upkeep(now=now + AFTER)

    assert (len(upkeep.lost), upkeep.ended) == (1, [idle.pk])
