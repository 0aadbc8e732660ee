"""verify() accepts what the relay signs: its signing module directly, and
webhooks a real dispatcher sends to a receiver on 127.0.0.1."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import pytest
from webhook_relay_client import InvalidSignature, verify

from deliveries.signing import serialize_body, signature_header
from endpoints.secrets import generate_secret
from tests.support.fakes import Receiver
from tests.support.processes import wait_until


@pytest.mark.parametrize(
    "data",
    [{}, {"n": 1}, {"name": "Zoë", "note": "☃ \u2028", "nested": [{"a": None}]}],
)
def test_a_body_the_relay_signs_with_two_secrets_verifies_with_either(data):
    new, old = generate_secret(), generate_secret()
    body = serialize_body(
        event_id="evt_1",
        event_type="order.paid",
        created_at=datetime.now(UTC),
        data=data,
    )
    now = int(time.time())
    headers = {
        "webhook-id": "evt_1",
        "webhook-timestamp": str(now),
        "webhook-signature": signature_header(
            secrets=[new, old], msg_id="evt_1", timestamp=now, body=body
        ),
    }
    for secret in (new, old):
        assert verify(secret, headers, body, now=now) == json.loads(body)
    with pytest.raises(InvalidSignature, match="no signature"):
        verify(generate_secret(), headers, body, now=now)


def test_djangos_request_headers_and_body_are_what_verify_takes(rf):
    # The README's Django receiver: request.headers and request.body as given.
    secret = generate_secret()
    body = serialize_body(
        event_id="evt_1", event_type="order.paid", created_at=datetime.now(UTC), data={}
    )
    now = int(time.time())
    signature = signature_header(
        secrets=[secret], msg_id="evt_1", timestamp=now, body=body
    )
    request = rf.post(
        "/webhooks/relay",
        data=body,
        content_type="application/json",
        headers={
            "webhook-id": "evt_1",
            "webhook-timestamp": str(now),
            "webhook-signature": signature,
        },
    )
    assert verify(secret, request.headers, request.body, now=now)["id"] == "evt_1"


@pytest.mark.postgres
@pytest.mark.acceptance
def test_webhooks_a_dispatcher_sends_verify_with_the_secret_the_client_got(
    relay_client, dispatchers
):
    slug = f"signed-{uuid.uuid4().hex[:8]}"
    relay_client.create_merchant(slug=slug, name="Signed")
    with Receiver() as rx:
        endpoint = relay_client.create_endpoint(slug, url=rx.url)
        first = relay_client.publish(merchant=slug, type="order.paid", data={"n": 1})
        dispatchers.start("--concurrency", "1")
        wait_until(lambda: len(rx.received) >= 1, timeout=60, what="the webhook")
        got = rx.received[0]
        assert verify(endpoint.secret, got.headers, got.body) == {
            "id": first.id,
            "type": "order.paid",
            "timestamp": first.created_at,
            "data": {"n": 1},
        }

        # During the rotation's overlap each webhook carries both signatures.
        rotated = relay_client.rotate_secret(slug, endpoint.id)
        relay_client.publish(merchant=slug, type="order.paid", data={"n": 2})
        wait_until(lambda: len(rx.received) >= 2, timeout=60, what="the second")
        got = rx.received[1]
        for secret in (endpoint.secret, rotated.secret):
            assert verify(secret, got.headers, got.body)["data"] == {"n": 2}
        with pytest.raises(InvalidSignature):
            verify(generate_secret(), got.headers, got.body)

        # A rotation with overlap 0 (a leaked secret): the next webhook carries
        # the newest secret's signature alone.
        leaked = relay_client.rotate_secret(slug, endpoint.id, overlap_seconds=0)
        relay_client.publish(merchant=slug, type="order.paid", data={"n": 3})
        wait_until(lambda: len(rx.received) >= 3, timeout=60, what="the third")
        got = rx.received[2]
        assert verify(leaked.secret, got.headers, got.body)["data"] == {"n": 3}
        for secret in (endpoint.secret, rotated.secret):
            with pytest.raises(InvalidSignature):
                verify(secret, got.headers, got.body)
