"""What the dispatcher signs with after a rotation that names its overlap: a
real receiver on loopback, signatures checked with the standardwebhooks
library's own signing, time moved by an injected clock."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.services import event_publish
from endpoints.models import EndpointSecret
from endpoints.secret_rotation import endpoint_rotate_secret
from tests.support import factories
from tests.support.fakes import BlockingSender, FakeClock, Received

pytestmark = pytest.mark.django_db(transaction=True)

TWO_DAYS = 2 * 86400


def deliver_one(endpoint, receiver, clock: FakeClock, n: int) -> Received:
    """Publish an event now (on the clock), drain, and return what arrived."""
    event_publish(merchant=endpoint.merchant, type="a", data={"n": n}, now=clock.now())
    sender = BlockingSender(timeout=5, body_limit=4096, allow_private=True)
    worker = Dispatcher(
        worker_id="w1",
        sender=sender,
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(1),
    )
    try:
        worker.run(drain=True)
    finally:
        worker.close()
        sender.close()
    return receiver.wait_for(n)[n - 1]


def clock_after(endpoint) -> FakeClock:
    """A clock past the endpoint's first secret: that one was made at the real
    now, and FakeClock starts at the whole second before it."""
    return FakeClock(start=endpoint.secrets.get().created_at + timedelta(seconds=1))


def signatures(request: Received) -> list[str]:
    return request.headers["webhook-signature"].split(" ")


def signature_with(secret: str, request: Received) -> str:
    """The v1 signature `secret` makes of this request, by standardwebhooks."""
    sent_at = datetime.fromtimestamp(int(request.headers["webhook-timestamp"]), UTC)
    return Webhook(secret).sign(
        request.headers["webhook-id"], sent_at, request.body.decode()
    )


def test_overlap_0_signs_the_very_next_send_with_the_new_secret_only(receiver):
    endpoint = factories.endpoint(url=receiver.url)
    clock = clock_after(endpoint)
    old = EndpointSecret.objects.get(endpoint=endpoint).secret

    new, expires = endpoint_rotate_secret(
        endpoint=endpoint, now=clock.now(), overlap_seconds=0
    )
    request = deliver_one(endpoint, receiver, clock, 1)

    assert expires == clock.now()
    assert signatures(request) == [signature_with(new.secret, request)]
    assert signature_with(old, request) not in signatures(request)


def test_overlap_of_2_days_signs_with_both_until_then_and_the_new_one_after(
    receiver,
):
    endpoint = factories.endpoint(url=receiver.url)
    clock = clock_after(endpoint)
    old = EndpointSecret.objects.get(endpoint=endpoint).secret
    new, _ = endpoint_rotate_secret(
        endpoint=endpoint, now=clock.now(), overlap_seconds=TWO_DAYS
    )

    clock.advance(TWO_DAYS - 1)
    during = deliver_one(endpoint, receiver, clock, 1)
    clock.advance(2)
    after = deliver_one(endpoint, receiver, clock, 2)

    assert signatures(during) == [
        signature_with(new.secret, during),  # newest first
        signature_with(old, during),
    ]
    assert signatures(after) == [signature_with(new.secret, after)]
