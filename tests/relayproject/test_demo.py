"""The demo receiver answers only with DEBUG or RELAY_DEMO, and holds little."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.test import Client
from standardwebhooks.webhooks import Webhook

from endpoints import verification
from relayproject import demo
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint():
    return factories.endpoint(factories.merchant("acme"))


@pytest.fixture(autouse=True)
def _empty_demo():
    demo._received.clear()
    yield
    demo._received.clear()


def url(endpoint_id: str) -> str:
    return f"/demo/receiver/{endpoint_id}/"


def test_demo_receiver_is_404_with_debug_false(settings, endpoint):
    settings.DEBUG = False
    settings.RELAY_DEMO = False
    client = Client(enforce_csrf_checks=True)
    assert client.get(url(endpoint.pk)).status_code == 404
    posted = client.post(url(endpoint.pk), b"{}", content_type="application/json")
    assert posted.status_code == 404
    assert not demo._received


def test_relay_demo_turns_it_on(settings, endpoint):
    settings.DEBUG = False
    settings.RELAY_DEMO = True
    assert Client().get(url(endpoint.pk)).status_code == 200


def test_unknown_endpoint_ids_are_404_and_kept_nowhere(settings):
    settings.RELAY_DEMO = True
    response = Client().post(url("ep_nope"), b"{}", content_type="application/json")
    assert response.status_code == 404
    assert not demo._received


def test_what_it_keeps_is_bounded(settings, endpoint):
    settings.RELAY_DEMO = True
    deep = "[" * 50_000 + "]" * 50_000
    for _ in range(demo.KEEP + 5):
        Client().post(
            url(endpoint.pk),
            json.dumps({"big": "x" * 100_000, "deep": "y"})[:-1]
            + ', "n": '
            + deep
            + "}",
            content_type="application/json",
        )
    assert len(demo._received) == demo.KEEP
    assert all(len(item["payload"]) <= demo.PAYLOAD_CHARS for item in demo._received)
    page = Client().get(url(endpoint.pk))
    assert page.status_code == 200


def test_it_echoes_a_signed_verification_challenge(settings, endpoint):
    settings.RELAY_DEMO = True
    secret = endpoint.secrets.get().secret
    body = json.dumps(
        {
            "id": "evt_1",
            "type": "relay.endpoint.verification",
            "timestamp": "2026-12-04T00:00:00.000Z",
            "data": {"challenge": "vrfy_demo"},
        }
    )
    now = datetime.now(UTC)
    signature = Webhook(secret).sign("evt_1", now, body)
    headers = {
        "webhook-id": "evt_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    response = Client().post(
        url(endpoint.pk), body, content_type="application/json", headers=headers
    )
    assert response.status_code == 200
    assert verification.echoed(response.content, "vrfy_demo")
    ping = json.dumps({"id": "evt_2", "type": "relay.test", "data": {}})
    headers["webhook-id"] = "evt_2"
    headers["webhook-signature"] = Webhook(secret).sign("evt_2", now, ping)
    other = Client().post(
        url(endpoint.pk), ping, content_type="application/json", headers=headers
    )
    assert other.content == b"ok"
