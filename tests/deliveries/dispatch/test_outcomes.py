"""What each receiver answer does to the delivery, the endpoint and its breaker."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.replay import delivery_replay
from deliveries.services import event_publish
from endpoints.models import Endpoint, EndpointHealth
from tests.support import factories
from tests.support.fakes import BlockingSender, FakeClock, Reply, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]


def ok(status: int = 200, **kw) -> SendResult:
    return SendResult(status_code=status, duration_ms=4.0, **kw)


def run(clock, sender, *, batch_size: int = 10) -> Dispatcher:
    worker = Dispatcher(
        worker_id="w",
        sender=sender,
        batch_size=batch_size,
        concurrency=1,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(3),
    )
    worker.run_once()
    worker.close()
    return worker


def publish(endpoint, clock, n: int = 1) -> None:
    for i in range(n):
        event_publish(
            merchant=endpoint.merchant, type="a", data={"i": i}, now=clock.now()
        )


def test_410_kills_the_delivery_and_disables_the_endpoint():
    clock = FakeClock()
    endpoint = factories.endpoint()
    publish(endpoint, clock)

    run(clock, ScriptedSender(ok(410)))

    endpoint = Endpoint.objects.get()
    assert Delivery.objects.get().status == "dead"
    assert not endpoint.is_active
    assert "410" in endpoint.disabled_reason


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_4xx_is_retried_like_any_other_failure(status):
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=2)
    publish(endpoint, clock)

    run(clock, ScriptedSender(ok(status)))

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 1)
    assert Attempt.objects.get().outcome == "retry"
    assert Endpoint.objects.get().is_active


def test_a_status_the_endpoint_makes_permanent_is_dead_at_once():
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=5)
    Endpoint.objects.filter(pk=endpoint.pk).update(permanent_statuses=[422])
    publish(endpoint, clock)

    run(clock, ScriptedSender(ok(422)))

    assert Delivery.objects.get().status == "dead"
    attempt = Attempt.objects.get()
    assert (attempt.outcome, attempt.error_kind) == ("dead", "permanent_status")
    assert Endpoint.objects.get().is_active


def test_permanent_failure_statuses_applies_to_every_endpoint(settings):
    settings.PERMANENT_FAILURE_STATUSES = [400]
    clock = FakeClock()
    publish(factories.endpoint(max_attempts=5), clock)

    run(clock, ScriptedSender(ok(400)))

    assert Delivery.objects.get().status == "dead"
    assert Attempt.objects.get().error_kind == "permanent_status"


def test_retry_after_on_429_sets_the_next_attempt(settings):
    settings.RETRY_MAX_DELAY_SECONDS = 3600
    clock = FakeClock()
    endpoint = factories.endpoint()
    publish(endpoint, clock)

    run(clock, ScriptedSender(ok(429, retry_after="120")))

    delivery = Delivery.objects.get()
    assert delivery.status == "pending"
    assert delivery.next_attempt_at == clock.now() + timedelta(seconds=120)


def test_the_last_allowed_failure_dead_letters_and_replay_gives_a_fresh_budget():
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=1)
    publish(endpoint, clock)
    run(clock, ScriptedSender(ok(503)))
    assert Delivery.objects.get().status == "dead"

    delivery_replay(delivery_id=Delivery.objects.get().pk, now=clock.now())
    sender = ScriptedSender(ok(200))
    run(clock, sender)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("succeeded", 2)
    assert list(Attempt.objects.values_list("number", "outcome")) == [
        (1, "dead"),
        (2, "succeeded"),
    ]
    assert sender.requests[0].headers["webhook-id"] == delivery.event_id


def test_breaker_opens_waits_probes_once_and_doubles_its_cooldown(settings):
    settings.BREAKER_FAILURE_THRESHOLD = 3
    settings.BREAKER_COOLDOWN_SECONDS = 100
    settings.RETRY_BASE_SECONDS = 1
    settings.RETRY_MAX_DELAY_SECONDS = 1
    clock = FakeClock()
    endpoint = factories.endpoint()
    publish(endpoint, clock, n=5)

    run(clock, ScriptedSender(default=ok(500)), batch_size=3)
    health = EndpointHealth.objects.get()
    assert (health.breaker_state, health.consecutive_failures) == ("open", 3)

    clock.advance(50)  # retries are due, but the breaker holds them back
    waiting = ScriptedSender()
    run(clock, waiting)
    assert waiting.requests == []
    assert sum(Delivery.objects.values_list("attempt_count", flat=True)) == 3

    clock.advance(51)  # cooldown over: exactly one probe, which fails
    probe = ScriptedSender(default=ok(500))
    run(clock, probe)
    health.refresh_from_db()
    assert len(probe.requests) == 1
    assert (health.breaker_state, health.cooldown_seconds) == ("open", 200)

    clock.advance(201)  # the next probe succeeds and closes the breaker
    run(clock, ScriptedSender(default=ok(200)), batch_size=1)
    health.refresh_from_db()
    assert (health.breaker_state, health.consecutive_failures) == ("closed", 0)
    assert health.cooldown_seconds == 100


def test_rate_limit_holds_back_without_spending_attempts():
    clock = FakeClock()
    endpoint = factories.endpoint(rate_limit_per_second=2)
    publish(endpoint, clock, n=5)

    sender = ScriptedSender()
    run(clock, sender)

    assert len(sender.requests) == 2
    waiting = Delivery.objects.filter(status="pending")
    assert waiting.count() == 3
    assert set(waiting.values_list("attempt_count", flat=True)) == {0}
    assert all(d.next_attempt_at > clock.now() for d in waiting)


def test_only_the_body_limit_of_a_large_response_is_kept(receiver):
    receiver.respond = lambda r: Reply(status=200, body=b"x" * 100_000)
    clock = FakeClock()
    endpoint = factories.endpoint(url=receiver.url)
    publish(endpoint, clock)

    run(clock, BlockingSender(timeout=5, body_limit=1000, allow_private=True))

    assert len(Attempt.objects.get().response_body) == 1000


def test_the_breaker_threshold_is_the_setting_in_force_when_recording(settings):
    clock = FakeClock()
    endpoint = factories.endpoint()  # made while the threshold was the default 10
    publish(endpoint, clock, n=3)
    settings.BREAKER_FAILURE_THRESHOLD = 3

    run(clock, ScriptedSender(default=ok(500)))

    health = EndpointHealth.objects.get()
    assert (health.breaker_state, health.failure_threshold) == ("open", 3)


def test_a_very_slow_endpoint_has_its_threshold_halved(settings):
    settings.BREAKER_FAILURE_THRESHOLD = 4
    clock = FakeClock()
    endpoint = factories.endpoint()
    EndpointHealth.objects.filter(endpoint=endpoint).update(
        p95_ms=6000, sample_count=20
    )
    publish(endpoint, clock, n=2)

    run(clock, ScriptedSender(default=ok(500)))

    assert EndpointHealth.objects.get().breaker_state == "open"


def test_a_success_logs_at_debug_and_a_failure_at_info(caplog):
    clock = FakeClock()
    endpoint = factories.endpoint(max_attempts=3)
    publish(endpoint, clock, n=2)
    caplog.set_level("DEBUG", logger="deliveries.dispatch.outcomes")

    run(clock, ScriptedSender(ok(200), ok(503)))

    levels = {
        record.message.split(" outcome=")[1].split()[0]: record.levelname
        for record in caplog.records
        if record.message.startswith("attempt delivery=")
    }
    assert levels == {"succeeded": "DEBUG", "retry": "INFO"}
