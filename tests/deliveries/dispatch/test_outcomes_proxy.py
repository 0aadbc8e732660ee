"""What an egress proxy's failure does to a delivery and its endpoint: an
attempt on record, retried, but no attempt of the budget spent and no
breaker moved (CONTRACT section 9)."""

from __future__ import annotations

import random

import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import EndpointHealth
from tests.support import factories
from tests.support.connect_proxy import ConnectProxy
from tests.support.fakes import BlockingSender, FakeClock, Receiver, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

PROXY_REFUSED = SendResult(
    status_code=None,
    duration_ms=2.0,
    error_kind="proxy_error",
    error_message="the egress proxy answered 403 Forbidden to CONNECT 127.0.0.1:9",
)


def run(clock, sender) -> None:
    worker = Dispatcher(
        worker_id="w",
        sender=sender,
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(3),
    )
    worker.run_once()
    worker.close()


def run_through(clock, proxy: ConnectProxy) -> None:
    sender = BlockingSender(
        timeout=5, body_limit=64, allow_private=True, proxy=proxy.url
    )
    try:
        run(clock, sender)
    finally:
        sender.close()


def due_again(clock, settings) -> None:
    clock.advance(settings.RETRY_MAX_DELAY_SECONDS + 1)


def test_proxy_failures_spend_no_attempt_and_leave_the_breaker_closed(settings):
    settings.BREAKER_FAILURE_THRESHOLD = 2
    clock = FakeClock()
    with ConnectProxy() as proxy, Receiver() as receiver:
        endpoint = factories.endpoint(url=receiver.url, max_attempts=2)
        event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())
        proxy.refuse = 403

        for number in range(1, 6):
            run_through(clock, proxy)
            delivery = Delivery.objects.get()
            assert (delivery.status, delivery.attempt_count) == ("pending", number)
            assert delivery.attempts_in_budget == 0
            health = EndpointHealth.objects.get()
            assert (health.breaker_state, health.consecutive_failures) == (
                "closed",
                0,
            )
            due_again(clock, settings)

        proxy.refuse = None
        run_through(clock, proxy)

        assert Delivery.objects.get().status == "succeeded"
        assert len(receiver.received) == 1
    attempts = list(Attempt.objects.order_by("number"))
    assert [(a.number, a.outcome, a.error_kind) for a in attempts] == [
        *((n, "retry", "proxy_error") for n in range(1, 6)),
        (6, "succeeded", ""),
    ]
    assert attempts[0].error_message.startswith("the egress proxy answered 403")


def test_the_receivers_own_failures_still_count_around_proxy_failures(settings):
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=2)
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())
    failed = SendResult(status_code=500, duration_ms=3.0)
    sender = ScriptedSender(failed, PROXY_REFUSED, PROXY_REFUSED, failed)

    for _ in range(4):
        run(clock, sender)
        due_again(clock, settings)

    delivery = Delivery.objects.get()
    # Two receiver failures of two allowed: dead, the proxy's not counted.
    assert (delivery.status, delivery.attempt_count) == ("dead", 4)
    assert delivery.attempts_in_budget == 2


def test_a_proxy_that_stays_down_is_asked_less_and_less_often(settings):
    settings.RETRY_BASE_SECONDS = 30
    settings.RETRY_MAX_DELAY_SECONDS = 3600
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=2)
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())
    waits = []

    for _ in range(4):
        run(clock, ScriptedSender(PROXY_REFUSED))
        delivery = Delivery.objects.get()
        waits.append((delivery.next_attempt_at - clock.now()).total_seconds())
        clock.advance(waits[-1] + 1)

    # Each run draws the same jitter (Random(3)) from a window that doubles
    # with the attempt's number, as the budget it does not spend cannot grow.
    assert waits == sorted(waits) and waits[-1] > 2 * waits[0] > 0
