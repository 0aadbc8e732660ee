"""What a receiver on loopback gets from an endpoint that signs with v1a or
both: a v1a signature it checks with the public key the relay publishes, by
an implementation of its own (cryptography's Ed25519, and standardwebhooks
for v1), never the relay's code."""

from __future__ import annotations

import base64
import random

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.services import event_publish
from endpoints.models import EndpointSecret
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import Api
from tests.support.fakes import BlockingSender, Received

pytestmark = pytest.mark.django_db(transaction=True)


def deliver_one(endpoint, receiver) -> Received:
    event_publish(merchant=endpoint.merchant, type="a", data={"n": 1}, now=utcnow())
    sender = BlockingSender(timeout=5, body_limit=4096, allow_private=True)
    worker = Dispatcher(
        worker_id="w1",
        sender=sender,
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        rand=random.Random(1),
    )
    try:
        worker.run(drain=True)
    finally:
        worker.close()
        sender.close()
    return receiver.wait_for(1)[0]


def published_key(endpoint) -> Ed25519PublicKey:
    """The endpoint's key as a receiver finds it: in the key set, no API key."""
    answer = Api(None).get(f"/merchants/{endpoint.merchant.slug}/signing-keys")
    [public_key] = [
        k["public_key"]
        for k in answer.json()["keys"]
        if k["endpoint_id"] == endpoint.pk
    ]
    raw = base64.b64decode(public_key.removeprefix("whpk_"), validate=True)
    return Ed25519PublicKey.from_public_bytes(raw)


def signatures(request: Received, version: str) -> list[bytes]:
    return [
        base64.b64decode(sig.split(",", 1)[1])
        for sig in request.headers["webhook-signature"].split(" ")
        if sig.split(",", 1)[0] == version
    ]


def signed_content(request: Received) -> bytes:
    headers = request.headers
    return (
        f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode()
        + request.body
    )


def v1_verifies(endpoint, request: Received) -> bool:
    secret = EndpointSecret.objects.get(endpoint=endpoint).secret
    Webhook(secret).verify(request.body, request.headers)  # raises when not
    return True


def test_a_v1a_signature_verifies_with_the_published_public_key(receiver):
    endpoint = factories.endpoint(url=receiver.url, signing="v1a")

    request = deliver_one(endpoint, receiver)

    [signature] = signatures(request, "v1a")
    published_key(endpoint).verify(signature, signed_content(request))
    assert signatures(request, "v1") == []


def test_a_v1a_signature_does_not_verify_another_body(receiver):
    """The check above is a real one: the same signature fails a changed body."""
    endpoint = factories.endpoint(url=receiver.url, signing="v1a")

    request = deliver_one(endpoint, receiver)

    [signature] = signatures(request, "v1a")
    with pytest.raises(InvalidSignature):
        published_key(endpoint).verify(signature, signed_content(request) + b" ")


def test_both_sends_a_v1_and_a_v1a_signature_and_each_verifies(receiver):
    endpoint = factories.endpoint(url=receiver.url, signing="both")

    request = deliver_one(endpoint, receiver)

    [v1a] = signatures(request, "v1a")
    published_key(endpoint).verify(v1a, signed_content(request))
    assert len(signatures(request, "v1")) == 1
    assert v1_verifies(endpoint, request)


def test_a_v1_endpoint_is_signed_as_before_with_no_v1a(receiver):
    endpoint = factories.endpoint(url=receiver.url)

    request = deliver_one(endpoint, receiver)

    assert signatures(request, "v1a") == []
    assert request.headers["webhook-signature"].startswith("v1,")
    assert v1_verifies(endpoint, request)
