"""The dispatcher end to end on one database: claim, send to a real receiver, record."""

from __future__ import annotations

import random

import pytest
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import EndpointSecret
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.fakes import BlockingSender, Reply

pytestmark = pytest.mark.django_db(transaction=True)


def make_dispatcher(**kwargs) -> Dispatcher:
    defaults = dict(
        worker_id="w1",
        sender=BlockingSender(timeout=5, body_limit=4096, allow_private=True),
        batch_size=10,
        concurrency=4,
        lease_seconds=60,
        rand=random.Random(1),
    )
    defaults.update(kwargs)
    return Dispatcher(**defaults)


def test_drain_delivers_signed_requests_that_standardwebhooks_verifies(receiver):
    endpoint = factories.endpoint(url=receiver.url)
    events = [
        event_publish(
            merchant=endpoint.merchant, type="payment.captured", data={"n": i}
        )
        for i in range(5)
    ]

    stats = make_dispatcher().run(drain=True)

    secret = EndpointSecret.objects.get(endpoint=endpoint).secret
    got = receiver.wait_for(5)
    assert sorted(r.headers["webhook-id"] for r in got) == sorted(e.id for e in events)
    for request in got:
        payload = Webhook(secret).verify(request.body, request.headers)
        assert payload["type"] == "payment.captured"
        assert request.headers["X-Relay-Attempt"] == "1"
        assert request.headers["User-Agent"].startswith("webhook-relay/")
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert stats.succeeded == 5


def test_a_500_is_retried_later_and_the_attempt_is_recorded(receiver):
    receiver.respond = lambda r: Reply(status=500, body=b"boom")
    endpoint = factories.endpoint(url=receiver.url)
    event_publish(merchant=endpoint.merchant, type="a", data={})

    make_dispatcher().run(drain=True)

    delivery = Delivery.objects.get()
    assert delivery.status == "pending"
    assert delivery.attempt_count == 1
    assert delivery.next_attempt_at > delivery.last_attempt_at
    attempt = Attempt.objects.get()
    assert (attempt.status_code, attempt.outcome, attempt.response_body) == (
        500,
        "retry",
        "boom",
    )


def test_during_a_rotation_overlap_both_secrets_verify_a_real_delivery(receiver):
    from endpoints.secret_rotation import endpoint_rotate_secret

    endpoint = factories.endpoint(url=receiver.url)
    old_secret = EndpointSecret.objects.get(endpoint=endpoint).secret
    new_secret, _expires = endpoint_rotate_secret(endpoint=endpoint, now=utcnow())
    event_publish(merchant=endpoint.merchant, type="a", data={"rotated": True})

    make_dispatcher().run(drain=True)

    request = receiver.wait_for(1)[0]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (old_secret, new_secret.secret):
        assert Webhook(secret).verify(request.body, request.headers) == {
            "id": request.headers["webhook-id"],
            "type": "a",
            "timestamp": request.json["timestamp"],
            "data": {"rotated": True},
        }


def test_a_connection_lost_after_a_claim_commits_strands_no_row(receiver, monkeypatch):
    """The claim is committed, then loading its jobs fails once (a database
    restart between the two): the rows are still sent in this run, not left
    delivering until their lease ends."""
    from django.db import OperationalError

    from deliveries.dispatch import dispatcher as dispatcher_module

    endpoint = factories.endpoint(url=receiver.url)
    for i in range(6):
        event_publish(merchant=endpoint.merchant, type="a", data={"n": i})
    real_load = dispatcher_module.jobs_load
    failures = []

    def load_failing_once(**kwargs):
        if not failures:
            failures.append(kwargs["delivery_ids"])
            raise OperationalError("server closed the connection unexpectedly")
        return real_load(**kwargs)

    monkeypatch.setattr(dispatcher_module, "jobs_load", load_failing_once)
    monkeypatch.setattr("deliveries.dispatch.outage.DB_BACKOFF_SECONDS", (0.05,))

    stats = make_dispatcher().run(drain=True)

    assert failures, "the fault was not injected"
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert stats.succeeded == 6
    assert len(receiver.received) == 6
