"""The demo receiver checks a v1a-only request with the endpoint's public key,
so an endpoint signing with v1a alone can try the built-in test receiver."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from deliveries.signing import signature_header
from relayproject import demo
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_demo(settings):
    settings.RELAY_DEMO = True
    demo._received.clear()
    yield
    demo._received.clear()


def post_signed(endpoint, private_key: str, body: bytes = b"{}"):
    now = int(time.time())
    header = signature_header(
        secrets=[],
        msg_id="msg_1",
        timestamp=now,
        body=body,
        scheme="v1a",
        private_key=private_key,
    )
    return Client().post(
        f"/demo/receiver/{endpoint.pk}/",
        body,
        content_type="application/json",
        headers={
            "webhook-id": "msg_1",
            "webhook-timestamp": str(now),
            "webhook-signature": header,
        },
    )


def test_a_v1a_request_verifies_with_the_endpoints_public_key():
    endpoint = factories.endpoint(factories.merchant("acme"), signing="v1a")

    response = post_signed(endpoint, endpoint.signing_private_key)

    assert response.status_code == 200
    assert demo._received[-1]["verified"] == "public key (v1a)"


def test_a_v1a_request_signed_by_another_key_is_refused():
    endpoint = factories.endpoint(factories.merchant("acme"), signing="v1a")
    other = factories.endpoint(endpoint.merchant, signing="v1a")

    response = post_signed(endpoint, other.signing_private_key)

    assert response.status_code == 400
