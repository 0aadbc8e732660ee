"""An endpoint's own retry policy at work in the dispatcher: its schedule
spaces the attempts exactly, its max_attempts ends them, its merchant's
defaults fill what it leaves empty, and its timeout bounds each attempt
against a real receiver."""

from __future__ import annotations

import random

import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.merchant_services import merchant_update
from tests.support import factories
from tests.support.fakes import BlockingSender, FakeClock, Reply, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

FAILING = SendResult(status_code=500, duration_ms=3.0)


def run(clock, sender, *, concurrency: int = 1) -> None:
    worker = Dispatcher(
        worker_id="w",
        sender=sender,
        batch_size=10,
        concurrency=concurrency,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(3),
    )
    worker.run_once()
    worker.close()


def publish(endpoint, clock) -> None:
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())


def waits(delivery_id: str) -> list[float]:
    started = list(
        Attempt.objects.filter(delivery_id=delivery_id)
        .order_by("number")
        .values_list("started_at", flat=True)
    )
    return [(b - a).total_seconds() for a, b in zip(started, started[1:], strict=False)]


def test_schedule_1_2_with_3_attempts_is_dead_after_exactly_three_spaced_so():
    clock = FakeClock()
    endpoint = factories.endpoint(retry_schedule=[1, 2], max_attempts=3)
    publish(endpoint, clock)
    sender = ScriptedSender(default=FAILING)

    run(clock, sender)  # attempt 1
    clock.advance(0.999)
    run(clock, sender)  # not due yet: 1 s after the first
    assert len(sender.requests) == 1
    clock.advance(0.001)
    run(clock, sender)  # attempt 2
    clock.advance(1.999)
    run(clock, sender)  # not due yet: 2 s after the second
    assert len(sender.requests) == 2
    clock.advance(0.001)
    run(clock, sender)  # attempt 3: the last
    clock.advance(3600)
    run(clock, sender)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("dead", 3)
    assert len(sender.requests) == 3
    assert waits(delivery.pk) == [1.0, 2.0]
    assert list(
        Attempt.objects.order_by("number").values_list("outcome", flat=True)
    ) == ["retry", "retry", "dead"]


def test_an_endpoint_with_no_policy_takes_its_merchants_defaults():
    clock = FakeClock()
    merchant = factories.merchant()
    merchant_update(merchant=merchant, retry_schedule=[4], max_attempts=2)
    endpoint = factories.endpoint(merchant)
    publish(endpoint, clock)
    sender = ScriptedSender(default=FAILING)

    run(clock, sender)
    delivery = Delivery.objects.get()
    assert (delivery.next_attempt_at - clock.now()).total_seconds() == 4.0
    clock.advance(4)
    run(clock, sender)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("dead", 2)


def test_the_endpoints_own_values_win_over_its_merchants_defaults():
    clock = FakeClock()
    merchant = factories.merchant()
    merchant_update(merchant=merchant, retry_schedule=[4], max_attempts=2)
    endpoint = factories.endpoint(merchant, retry_schedule=[1], max_attempts=3)
    publish(endpoint, clock)
    sender = ScriptedSender(default=FAILING)

    run(clock, sender)
    delivery = Delivery.objects.get()
    assert (delivery.next_attempt_at - clock.now()).total_seconds() == 1.0
    clock.advance(1)
    run(clock, sender)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 2)


def test_a_1_s_timeout_ends_the_attempt_at_1_s_while_the_default_waits_the_answer(
    receiver,
):
    receiver.respond = lambda _request: Reply(status=200, delay=2.0)
    clock = FakeClock()
    merchant = factories.merchant()
    hasty = factories.endpoint(merchant, url=receiver.url, timeout_seconds=1)
    patient = factories.endpoint(merchant, url=receiver.url)
    publish(hasty, clock)  # one delivery to each endpoint

    run(
        clock,
        BlockingSender(timeout=5, body_limit=4096, allow_private=True),
        concurrency=2,
    )

    timed_out = Attempt.objects.get(endpoint_id=hasty.pk)
    assert (timed_out.error_kind, timed_out.outcome) == ("timeout", "retry")
    assert "within 1 s" in timed_out.error_message
    assert 900 <= timed_out.response_ms < 2000
    answered = Attempt.objects.get(endpoint_id=patient.pk)
    assert (answered.status_code, answered.outcome) == (200, "succeeded")
