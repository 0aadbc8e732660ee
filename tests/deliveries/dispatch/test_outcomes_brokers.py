"""A broker endpoint's sends go through the same engine: what the job carries
to the sender, and what an acknowledgement or a refusal records."""

from __future__ import annotations

import pytest

from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery, ErrorKind
from endpoints.models import Endpoint, EndpointHealth
from tests.deliveries.dispatch.test_outcomes import publish, run
from tests.support import factories
from tests.support.fakes import FakeClock, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

ACK = "publisher confirm: ack (exchange 'orders', routing key 'paid')"


def broker_endpoint(merchant=None, **kw) -> Endpoint:
    endpoint = factories.endpoint(merchant, **kw)
    endpoint.kind = "rabbitmq"
    endpoint.url = "amqp://127.0.0.1:5672/shop"
    endpoint.target = {"exchange": "orders", "routing_key": "paid"}
    endpoint.broker_credentials = "app:hunter2-broker"
    endpoint.save()
    return endpoint


def acknowledged(answer: str = ACK) -> SendResult:
    return SendResult(None, 3.0, body_excerpt=answer, acknowledged=True)


def test_the_job_carries_the_kind_target_credentials_and_the_hosts(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1:5672"]
    clock = FakeClock()
    endpoint = broker_endpoint()
    publish(endpoint, clock)
    sender = ScriptedSender(acknowledged())

    run(clock, sender)

    (request,) = sender.requests
    assert request.kind == "rabbitmq"
    assert request.url == "amqp://127.0.0.1:5672/shop"
    assert dict(request.target) == {"exchange": "orders", "routing_key": "paid"}
    assert request.credentials == "app:hunter2-broker"
    assert request.broker_hosts == ("127.0.0.1:5672",)
    assert "hunter2" not in repr(request)
    assert request.headers["webhook-id"] == Delivery.objects.get().event_id


def test_a_merchants_own_list_is_the_one_its_sends_carry(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    clock = FakeClock()
    endpoint = broker_endpoint()
    endpoint.merchant.broker_hosts = ["mq.example.com:5671"]
    endpoint.merchant.save()
    publish(endpoint, clock)
    sender = ScriptedSender(acknowledged())

    run(clock, sender)

    assert sender.requests[0].broker_hosts == ("mq.example.com:5671",)


def test_a_kind_the_operator_turned_off_carries_no_hosts(settings):
    # No host may then be reached: the send is refused (destination_blocked).
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    settings.RELAY_BROKER_KINDS = ["redis"]
    clock = FakeClock()
    publish(broker_endpoint(), clock)
    sender = ScriptedSender(acknowledged())

    run(clock, sender)

    assert sender.requests[0].broker_hosts == ()


def test_an_acknowledgement_is_a_success_without_an_http_status():
    clock = FakeClock()
    endpoint = broker_endpoint()
    publish(endpoint, clock)

    run(clock, ScriptedSender(acknowledged()))

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_status_code) == ("succeeded", None)
    assert delivery.last_error == ""
    attempt = Attempt.objects.get()
    assert (attempt.outcome, attempt.status_code, attempt.error_kind) == (
        "succeeded",
        None,
        "",
    )
    assert attempt.response_body == ACK
    assert attempt.request_url == "amqp://127.0.0.1:5672/shop"
    assert EndpointHealth.objects.get(endpoint=endpoint).consecutive_failures == 0


@pytest.mark.parametrize(
    "kind",
    [ErrorKind.BROKER_REFUSED, ErrorKind.BROKER_AUTH],
)
def test_a_broker_refusal_is_a_failed_attempt_retried_then_dead(kind):
    clock = FakeClock()
    endpoint = broker_endpoint(max_attempts=2)
    publish(endpoint, clock)
    refused = SendResult(None, 2.0, kind, "RabbitMQ returned the message: NO_ROUTE")

    run(clock, ScriptedSender(refused))
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_error) == ("pending", kind)
    clock.advance(3600)
    run(clock, ScriptedSender(refused))

    assert Delivery.objects.get().status == "dead"
    assert list(
        Attempt.objects.order_by("number").values_list("outcome", "error_kind")
    ) == [
        ("retry", kind),
        ("dead", kind),
    ]
    assert EndpointHealth.objects.get(endpoint=endpoint).consecutive_failures == 2


def test_an_acknowledgement_with_an_error_kind_is_not_a_success():
    # Only a clean acknowledgement counts; a sender bug must not turn a
    # failure into a delivered event.
    clock = FakeClock()
    publish(broker_endpoint(max_attempts=3), clock)

    run(
        clock,
        ScriptedSender(
            SendResult(None, 1.0, ErrorKind.TIMEOUT, "late", acknowledged=True)
        ),
    )

    assert Delivery.objects.get().status == "pending"
    assert Attempt.objects.get().outcome == "retry"
