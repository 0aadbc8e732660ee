"""A broker endpoint's deliveries in the portal: the page says what was
published where and what the broker answered, never an HTTP request or
status that did not happen, and a failed attempt's error kind in words."""

from __future__ import annotations

import html as markup
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.services import event_publish
from endpoints.probes import endpoint_breaker_open
from relayproject.lib.clock import utcnow
from tests.deliveries.notifications.conftest import attempt
from tests.support import factories

BROKER_PASSWORD = "pw-3b8d21f0e6"
BROKER_URL = "amqp://127.0.0.1:5672/"
ANSWER = "publisher confirm: ack (the default exchange, routing key 'orders')"


@pytest.fixture(autouse=True)
def _brokers_on(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1:5672"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq"]


@pytest.fixture
def broker(world):
    return factories.endpoint(
        world.mine.merchant,
        kind="rabbitmq",
        url=f"amqp://guest:{BROKER_PASSWORD}@127.0.0.1:5672/",
        target={"exchange": "", "routing_key": "orders"},
    )


def text_of(page: str) -> str:
    """What a person reads: tags dropped, entities decoded, spaces collapsed."""
    text = " ".join(markup.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    return re.sub(r" ([,.:;)])", r"\1", text)


def attempted(endpoint, *, status: str, attempts: list[dict]):
    """A delivery to endpoint with the attempts given, as the dispatcher
    records a broker's (no status code; the answer as the body)."""
    event = event_publish(
        merchant=endpoint.merchant,
        type="order.paid",
        data={},
        endpoint_ids=[endpoint.pk],
    )
    delivery = event.created_deliveries[0]
    now = utcnow()
    for number, fields in enumerate(attempts, 1):
        Attempt.objects.create(
            delivery=delivery,
            endpoint=endpoint,
            number=number,
            started_at=now,
            response_ms=4.0,
            status_code=None,
            request_url=BROKER_URL,
            request_headers=[["webhook-id", delivery.event_id]],
            **fields,
        )
    last = attempts[-1]
    Delivery.objects.filter(pk=delivery.pk).update(
        status=status,
        attempt_count=len(attempts),
        last_status_code=None,
        last_error=f"{last['error_kind']}: {last['error_message']}"
        if last.get("error_kind")
        else "",
        dead_at=now if status == "dead" else None,
        succeeded_at=now if status == "succeeded" else None,
    )
    return delivery


def page(client, world, delivery) -> str:
    client.force_login(world.owner)
    url = reverse(
        "portal:delivery_detail", args=[world.mine.merchant.slug, delivery.pk]
    )
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_broker_success_shows_the_brokers_answer_not_an_http_exchange(
    client, world, broker
):
    delivery = attempted(
        broker,
        status="succeeded",
        attempts=[{"outcome": "succeeded", "error_kind": "", "response_body": ANSWER}],
    )
    html = page(client, world, delivery)
    text = text_of(html)
    assert "Broker's answer" in text
    assert ANSWER in text
    assert f"Published to {BROKER_URL}" in text
    assert "Message as published in attempt 1" in text
    for untrue in ("POST amqp", "curl", "Response headers", "<th>Status</th>"):
        assert untrue not in html
    assert BROKER_PASSWORD not in html


def test_a_replayed_broker_success_says_the_broker_acknowledged_it(
    client, world, broker
):
    delivery = attempted(
        broker,
        status="pending",
        attempts=[{"outcome": "succeeded", "error_kind": "", "response_body": ANSWER}],
    )
    text = text_of(page(client, world, delivery))
    assert "The previous attempt succeeded (the broker acknowledged it)." in text
    assert "HTTP None" not in text


@pytest.mark.parametrize(
    ("kind", "said", "words"),
    [
        (
            ErrorKind.BROKER_REFUSED,
            "RabbitMQ returned the message: NO_ROUTE (the default exchange, "
            "routing key 'orders')",
            "The broker refused the message: RabbitMQ returned the message: NO_ROUTE",
        ),
        (
            ErrorKind.BROKER_AUTH,
            "RabbitMQ at 127.0.0.1:5672 refused the login of user 'guest'",
            "The broker refused access (a wrong user or password, or no "
            "permission): RabbitMQ at 127.0.0.1:5672 refused the login",
        ),
        (
            ErrorKind.BROKER_REFUSED,
            "RabbitMQ closed the channel: PRECONDITION_FAILED",
            "The broker refused the message: RabbitMQ closed the channel",
        ),
    ],
)
def test_a_failed_broker_attempt_names_its_error_kind_in_words(
    client, world, broker, kind, said, words
):
    delivery = attempted(
        broker,
        status="dead",
        attempts=[
            {
                "outcome": "dead",
                "error_kind": kind,
                "error_message": said,
                "response_body": "",
            }
        ],
    )
    text = text_of(page(client, world, delivery))
    assert words in text
    assert kind not in text  # the machine's code stays out of the words
    assert "Replay it once the broker is fixed." in text
    assert "none: see the error" in text


def test_a_test_send_to_a_broker_endpoint_shows_the_message_to_be_published(
    client, world, broker
):
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    response = client.post(reverse("portal:endpoint_test", args=[slug, broker.pk]))
    assert response.status_code == 302
    delivery = Delivery.objects.get(endpoint=broker)
    assert response["Location"] == reverse(
        "portal:delivery_detail", args=[slug, delivery.pk]
    )
    html = client.get(response["Location"]).content.decode()
    text = text_of(html)
    assert "Message as it will be published" in text
    assert (
        f"Published to {BROKER_URL}, the default exchange, routing key 'orders', "
        "with these message headers:" in text
    )
    assert "curl" not in html
    assert BROKER_PASSWORD not in html


def test_the_endpoint_pages_say_where_it_publishes_and_never_the_password(
    client, world, broker
):
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    detail = client.get(reverse("portal:endpoint_detail", args=[slug, broker.pk]))
    listed = client.get(reverse("portal:endpoint_list", args=[slug]))
    text = text_of(detail.content.decode())
    assert "Kind RabbitMQ exchange" in text
    assert f"Broker {BROKER_URL}" in text
    assert "Target the default exchange, routing key 'orders'" in text
    assert "Credentials set: user 'guest' and a password, which is never shown" in text
    assert "Stop retrying on" not in text  # no status to stop on
    assert "Verify in your consumer" in text
    assert "publishes to the default exchange, routing key 'orders'" in text_of(
        listed.content.decode()
    )
    for response in (detail, listed):
        assert BROKER_PASSWORD not in response.content.decode()


def test_a_failing_broker_endpoint_is_told_to_look_at_the_broker(client, world, broker):
    """Not "answers 2xx within the timeout": a broker answers no status."""
    attempt(broker, utcnow() - timedelta(hours=2))
    endpoint_breaker_open(endpoint_id=broker.pk, reason="opened after 10 failures")
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    detail = text_of(
        client.get(
            reverse("portal:endpoint_detail", args=[slug, broker.pk])
        ).content.decode()
    )
    health = text_of(
        client.get(
            reverse("portal:endpoint_health", args=[slug, broker.pk])
        ).content.decode()
    )
    assert "This endpoint is failing since" in detail
    assert "check that the broker is up, takes the user and password" in detail
    assert "2xx" not in detail
    assert "from the publish's start to the broker's acknowledgement" in health
