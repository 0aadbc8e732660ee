"""The client library against a live relay (gunicorn on 127.0.0.1): the calls
a service makes, and what it sees when they fail."""

from __future__ import annotations

import uuid

import pytest
from webhook_relay_client import Client, ProblemError, RetryPolicy, urllib_transport

from deliveries.models import Delivery, Event
from endpoints.apikeys import apikey_create
from endpoints.models import Merchant
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]


def publish(client: Client, merchant: str, n: int = 1, **kwargs):
    return client.publish(merchant=merchant, type="order.paid", data={"n": n}, **kwargs)


def with_endpoint() -> str:
    merchant = factories.merchant()
    factories.endpoint(merchant)
    return merchant.slug


def test_a_merchant_and_its_endpoint_are_made_changed_and_removed(relay_client):
    slug = f"acme-{uuid.uuid4().hex[:8]}"
    merchant = relay_client.create_merchant(slug=slug, name="Acme")
    assert (merchant.slug, merchant.name, merchant.is_active) == (slug, "Acme", True)
    assert relay_client.get_merchant(slug) == merchant

    created = relay_client.create_endpoint(
        slug, url="http://127.0.0.1:9/hook", event_types=["order.*"]
    )
    assert created.secret.startswith("whsec_")
    assert created.secret not in repr(created)  # logging an answer shows no secret
    assert relay_client.get_endpoint(slug, created.id).event_types == ["order.*"]

    changed = relay_client.update_endpoint(
        slug, created.id, description="orders", max_attempts=3
    )
    assert (changed.description, changed.max_attempts) == ("orders", 3)
    cleared = relay_client.update_endpoint(slug, created.id, max_attempts=None)
    assert (cleared.description, cleared.max_attempts) == ("orders", None)

    relay_client.delete_endpoint(slug, created.id)
    with pytest.raises(ProblemError) as raised:
        relay_client.get_endpoint(slug, created.id)
    assert raised.value.status == 404


def test_publishing_again_with_the_same_key_answers_the_first_event(relay_client):
    slug = with_endpoint()
    first = publish(relay_client, slug, idempotency_key="order-1-paid")
    again = publish(relay_client, slug, idempotency_key="order-1-paid")
    assert not first.replayed and again.replayed
    assert again.id == first.id and again.deliveries == first.deliveries
    assert len(first.deliveries) == 1
    assert Event.objects.count() == 1


def test_the_same_key_with_another_body_is_a_422_on_the_header(relay_client):
    slug = with_endpoint()
    publish(relay_client, slug, 1, idempotency_key="k")
    with pytest.raises(ProblemError) as raised:
        publish(relay_client, slug, 2, idempotency_key="k")
    assert raised.value.status == 422
    assert raised.value.errors_at("header", "Idempotency-Key") == (
        "Reused with another body.",
    )


def test_a_batch_is_stored_whole(relay_client):
    slug = with_endpoint()
    events = relay_client.publish_batch(
        [{"merchant": slug, "type": "order.paid", "data": {"n": n}} for n in range(3)]
    )
    assert len(events) == 3 and len({e.id for e in events}) == 3
    assert Event.objects.count() == 3


def test_iterating_a_list_walks_every_page(relay_client):
    merchant = factories.merchant()
    made = [factories.endpoint(merchant).pk for _ in range(5)]
    listed = relay_client.list_endpoints(merchant.slug, limit=2)
    assert [len(page.items) for page in listed.pages()] == [2, 2, 1]
    assert [e.id for e in listed] == sorted(made, reverse=True)  # newest first

    relay_client.publish_batch(
        [{"merchant": merchant.slug, "type": "order.paid", "data": {}}] * 3
    )
    deliveries = list(relay_client.list_deliveries(merchant=merchant.slug, limit=4))
    assert len(deliveries) == 15
    assert {d.id for d in deliveries} == set(
        Delivery.objects.values_list("pk", flat=True)
    )


def test_invalid_fields_raise_a_problem_error_naming_each(relay_client):
    slug = factories.merchant().slug
    with pytest.raises(ProblemError) as raised:
        relay_client.create_endpoint(slug, url="not a url", max_attempts=0)
    error = raised.value
    assert error.status == 422 and error.title
    assert {e.loc for e in error.errors} == {("body", "url"), ("body", "max_attempts")}
    assert all(e.msg for e in error.errors)


def test_an_unknown_object_is_a_404_problem(relay_client):
    with pytest.raises(ProblemError) as raised:
        relay_client.get_event("evt_nowhere")
    assert raised.value.status == 404
    assert raised.value.detail == "No event 'evt_nowhere'."


class Counted:
    """The default transport, counting the requests it sends."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, method, url, headers, body, timeout):
        self.sent.append(f"{method} {url}")
        return urllib_transport(method, url, headers, body, timeout)


def test_a_rate_limited_publish_is_retried_within_bounds_then_raised(
    relay, transactional_db, sleeps
):
    merchant = factories.merchant()
    Merchant.objects.filter(pk=merchant.pk).update(
        publish_rate_per_second=0.01,
        publish_burst=1,  # a token each 100 s
    )
    _, key = apikey_create(name="client library", merchant=merchant)
    counted = Counted()
    client = Client(
        relay.url("/"),
        key,
        retry=RetryPolicy(max_retries=2, max_wait=5.0),
        transport=counted,
        sleep=sleeps,
    )
    publish(client, merchant.slug, 1, idempotency_key="first")

    with pytest.raises(ProblemError) as raised:
        publish(client, merchant.slug, 2, idempotency_key="second")
    assert raised.value.status == 429 and 99 <= raised.value.retry_after <= 100
    assert sleeps == [5.0, 5.0]  # Retry-After 100 s, clamped to max_wait
    assert len(counted.sent) == 1 + 3

    with pytest.raises(ProblemError):
        publish(client, merchant.slug, 3)  # no key: not sent again
    assert len(counted.sent) == 1 + 3 + 1 and sleeps == [5.0, 5.0]
    assert Event.objects.count() == 1


def test_a_dead_delivery_is_replayed(relay_client):
    delivery_id = publish(relay_client, with_endpoint()).deliveries[0].id
    Delivery.objects.filter(pk=delivery_id).update(status="dead", dead_at=utcnow())
    assert relay_client.get_delivery(delivery_id).status == "dead"

    replayed = relay_client.replay_delivery(delivery_id)
    assert (replayed.id, replayed.status) == (delivery_id, "pending")
    assert relay_client.get_delivery(delivery_id).status == "pending"
