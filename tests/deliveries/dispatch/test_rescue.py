"""Dead dispatchers, judged by their heartbeat's age on the database's clock:
their rows are due again at once, taken over as an expired lease is, and what
they send late is fenced off."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from deliveries.dispatch import claiming, outcomes, rescue, single_claims
from deliveries.dispatch.heartbeat import heartbeat_touch
from deliveries.models import Attempt, Delivery, DispatcherHeartbeat
from deliveries.ops import counters
from deliveries.services import event_publish
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_recovery import sent_for
from tests.support import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

DEAD_AFTER = 20
LONG_LEASE = 3600  # the backstop: nothing here waits for it


def held_by(worker_id: str, n: int = 2) -> claiming.Claim:
    """n deliveries claimed by worker_id under a long lease."""
    endpoint = factories.endpoint()
    for i in range(n):
        event_publish(merchant=endpoint.merchant, type="a", data={"n": i})
    return claiming.claim_batch(
        worker_id=worker_id, now=utcnow(), lease_seconds=LONG_LEASE, limit=n
    )


def beat(worker_id: str, *, ago: float) -> None:
    heartbeat_touch(worker_id=worker_id, now=utcnow() - timedelta(seconds=ago))


def rescue_now(judge: str = "judge") -> list[rescue.Rescued]:
    return rescue.dispatchers_rescue(judge=judge, dead_after=DEAD_AFTER)


def test_a_dispatcher_silent_past_the_threshold_is_declared_dead_and_its_rows_are_due():
    claim = held_by("gone")
    beat("gone", ago=DEAD_AFTER + 5)

    [rescued] = rescue_now()

    assert (rescued.worker_id, rescued.declared, rescued.released) == ("gone", True, 2)
    row = DispatcherHeartbeat.objects.get(worker_id="gone")
    assert (row.deaths, row.released) == (1, 2)
    assert row.declared_dead_at is not None
    # Taken over at once by the next claim, as an expired lease is.
    taken = claiming.claim_batch(
        worker_id="heir", now=utcnow(), lease_seconds=LONG_LEASE, limit=10
    )
    assert sorted(taken.delivery_ids) == sorted(claim.delivery_ids)
    assert taken.reclaimed == 2
    assert set(Attempt.objects.values_list("worker_id", "error_kind", "outcome")) == {
        ("gone", "lease_expired", "retry")
    }
    totals = counters.counter_totals()
    assert totals[(counters.DISPATCHERS_DEAD, "")] == 1
    assert totals[(counters.DEAD_DISPATCHER_RELEASED, "")] == 2


def test_a_dispatcher_that_beat_within_the_threshold_keeps_its_rows():
    claim = held_by("busy")
    beat("busy", ago=DEAD_AFTER - 5)

    assert rescue_now() == []

    assert not claiming.claim_batch(
        worker_id="heir", now=utcnow(), lease_seconds=LONG_LEASE, limit=10
    ).delivery_ids
    assert set(Delivery.objects.values_list("claimed_until", flat=True)) == {
        claim.lease_until
    }


def test_the_judge_never_judges_itself_nor_a_worker_without_a_heartbeat():
    held_by("judge")
    held_by("never-beat")
    beat("judge", ago=DEAD_AFTER + 5)

    assert rescue_now(judge="judge") == []
    assert not Delivery.objects.filter(next_attempt_at__lte=utcnow()).exists()


def test_a_dead_dispatcher_is_counted_once_however_often_it_is_judged():
    held_by("gone")
    beat("gone", ago=DEAD_AFTER + 5)
    rescue_now()

    assert rescue_now() == []
    assert rescue_now(judge="another") == []
    assert DispatcherHeartbeat.objects.get(worker_id="gone").deaths == 1
    assert counters.counter_totals()[(counters.DISPATCHERS_DEAD, "")] == 1


def test_a_late_outcome_from_a_dispatcher_declared_dead_is_fenced_off():
    claim = held_by("frozen", n=1)
    [delivery_id] = claim.delivery_ids
    late = sent_for(delivery_id, claim, 200, utcnow())
    beat("frozen", ago=DEAD_AFTER + 5)
    rescue_now()

    # Before anyone took the row over, and after: neither is its to write.
    first = outcomes.outcomes_record(
        sent=[late], worker_id="frozen", now=utcnow(), rand=random.Random(1)
    )
    heir = claiming.claim_batch(
        worker_id="heir", now=utcnow(), lease_seconds=LONG_LEASE, limit=1
    )
    second = outcomes.outcomes_record(
        sent=[late], worker_id="frozen", now=utcnow(), rand=random.Random(1)
    )

    assert first.fenced == second.fenced == [delivery_id]
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.claimed_by) == ("delivering", "heir")
    assert delivery.claimed_until == heir.lease_until
    assert (
        claiming.release(
            worker_id="frozen",
            lease_until=claim.lease_until,
            delivery_ids=[delivery_id],
            due_at=utcnow(),
        )
        == 0
    )


def test_a_dispatcher_back_from_the_dead_and_gone_again_is_declared_again():
    held_by("flaky", n=1)
    beat("flaky", ago=DEAD_AFTER + 5)
    rescue_now()
    # That was a minute ago; it came back, claimed again, and went silent.
    DispatcherHeartbeat.objects.update(declared_dead_at=utcnow() - timedelta(minutes=1))
    held_by("flaky", n=1)
    beat("flaky", ago=DEAD_AFTER + 1)

    [rescued] = rescue_now()

    assert (rescued.declared, rescued.released) == (True, 1)
    assert DispatcherHeartbeat.objects.get(worker_id="flaky").deaths == 2


def test_a_half_open_breaker_whose_probe_the_dead_held_is_due_a_new_probe():
    endpoint = factories.endpoint()
    event_publish(merchant=endpoint.merchant, type="a", data={})
    now = utcnow()
    EndpointHealth.objects.filter(endpoint=endpoint).update(
        breaker_state=EndpointHealth.State.OPEN, next_probe_at=now
    )
    probe = single_claims.claim_probes(
        worker_id="gone", now=now, lease_seconds=LONG_LEASE
    )
    assert len(probe.probe_ids) == 1
    beat("gone", ago=DEAD_AFTER + 5)

    rescue_now()

    again = single_claims.claim_probes(
        worker_id="heir", now=utcnow(), lease_seconds=LONG_LEASE
    )
    assert again.probe_ids == probe.probe_ids
    assert again.reclaimed == 1


def test_a_restart_under_the_same_worker_id_releases_what_its_predecessor_held():
    started = utcnow()
    endpoint = factories.endpoint()
    before = started - timedelta(seconds=30)
    for _ in range(3):
        event_publish(merchant=endpoint.merchant, type="a", data={}, now=before)
    old = claiming.claim_batch(  # by the predecessor, before this process began
        worker_id="w", now=before, lease_seconds=LONG_LEASE, limit=2
    )
    mine = claiming.claim_batch(  # by this process
        worker_id="w", now=started, lease_seconds=LONG_LEASE, limit=1
    )

    [rescued] = rescue.predecessor_rescue(
        worker_id="w", claimed_before=started + timedelta(seconds=LONG_LEASE)
    )

    assert rescued.released == 2
    due = Delivery.objects.filter(next_attempt_at__lte=utcnow())
    assert set(due.values_list("pk", flat=True)) == set(old.delivery_ids)
    [kept] = mine.delivery_ids
    assert Delivery.objects.get(pk=kept).claimed_until == mine.lease_until
