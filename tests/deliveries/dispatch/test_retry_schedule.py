"""Retries merchants expect, against a real receiver on 127.0.0.1: every
answer that is not 2xx is retried on the schedule, 410 stops and disables,
and a status the endpoint makes permanent stops at once with its reason shown."""

from __future__ import annotations

import random

import pytest
from django.urls import reverse

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import Endpoint, Membership
from tests.support import factories
from tests.support.fakes import BlockingSender, FakeClock, Reply
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db(transaction=True)


def send_due(clock: FakeClock) -> None:
    """One claim through the real sender, then past the longest backoff."""
    worker = Dispatcher(
        worker_id="w",
        sender=BlockingSender(timeout=5, body_limit=4096, allow_private=True),
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(5),
    )
    worker.run_once()
    worker.close()
    clock.advance(3601)


def scripted(receiver, *statuses: int) -> None:
    """The receiver answers these statuses in turn, then 200."""
    answers = list(statuses)
    receiver.respond = lambda _r: Reply(status=answers.pop(0) if answers else 200)


def test_a_401_twice_then_200_succeeds_on_the_third_attempt(settings, receiver):
    settings.RETRY_MAX_DELAY_SECONDS = 3600
    scripted(receiver, 401, 401)
    clock = FakeClock()
    endpoint = factories.endpoint(url=receiver.url, max_attempts=3)
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())

    for _ in range(3):
        send_due(clock)

    assert [r.headers["X-Relay-Attempt"] for r in receiver.wait_for(3)] == [
        "1",
        "2",
        "3",
    ]
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("succeeded", 3)
    assert list(Attempt.objects.values_list("status_code", "outcome")) == [
        (401, "retry"),
        (401, "retry"),
        (200, "succeeded"),
    ]


def test_a_410_is_dead_at_once_and_disables_the_endpoint(receiver):
    scripted(receiver, 410)
    clock = FakeClock()
    endpoint = factories.endpoint(url=receiver.url, max_attempts=5)
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())

    send_due(clock)
    send_due(clock)

    assert len(receiver.received) == 1
    assert Delivery.objects.get().status == "dead"
    endpoint = Endpoint.objects.get()
    assert not endpoint.is_active
    assert endpoint.disabled_reason == "the receiver answered 410 Gone"


def test_a_status_made_permanent_dies_at_once_with_the_reason_shown(
    client, settings, receiver
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    scripted(receiver, 422)
    clock = FakeClock()
    endpoint = factories.endpoint(
        url=receiver.url, max_attempts=5, permanent_statuses=[422]
    )
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())

    send_due(clock)
    send_due(clock)

    assert len(receiver.received) == 1
    delivery = Delivery.objects.get()
    assert delivery.status == "dead"
    assert Endpoint.objects.get().is_active
    client.force_login(
        user_with_role(endpoint.merchant, Membership.Role.VIEWER, "viewer")
    )
    html = client.get(
        reverse("portal:delivery_detail", args=[endpoint.merchant.slug, delivery.pk])
    ).content.decode()
    assert "Not retried because the receiver answered HTTP 422 Unprocessable" in html
    assert "a status this endpoint treats as permanent" in html
