"""The request's headers have one builder: the next attempt the portal shows is
the request the dispatcher then sends, name for name and in order."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from deliveries.models import Attempt, Delivery
from deliveries.request import outgoing_headers
from deliveries.services import event_publish
from relayproject.portal.selectors import HIDDEN_VALUE, delivery_request
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)


def test_relay_headers_win_over_custom_ones_and_the_transport_s_come_last():
    headers = outgoing_headers(
        custom={"X-Team": "a", "User-Agent": "theirs"},
        event_id="evt_1",
        delivery_id="dlv_1",
        attempt=3,
        timestamp="1700000000",
        signature="v1,abc",
        traceparent="00-t-s-01",
    )
    assert list(headers.items()) == [
        ("X-Team", "a"),
        ("User-Agent", headers["User-Agent"]),
        ("Content-Type", "application/json"),
        ("webhook-id", "evt_1"),
        ("webhook-timestamp", "1700000000"),
        ("webhook-signature", "v1,abc"),
        ("X-Relay-Event-Id", "evt_1"),
        ("X-Relay-Delivery-Id", "dlv_1"),
        ("X-Relay-Attempt", "3"),
        ("traceparent", "00-t-s-01"),
        ("Accept-Encoding", "identity"),
    ]
    assert headers["User-Agent"].startswith("webhook-relay/")


def test_the_next_request_shown_is_the_one_then_sent(receiver):
    endpoint = factories.endpoint(url=receiver.url, headers={"X-Api-Key": "k-123"})
    event_publish(merchant=endpoint.merchant, type="a", data={"n": 1})
    delivery = Delivery.objects.select_related("event", "endpoint").get()

    shown = delivery_request(delivery=delivery)
    assert shown.source == "next"
    assert ("X-Api-Key", HIDDEN_VALUE) in shown.headers

    call_command("run_dispatcher", "--drain")
    receiver.wait_for(1)
    sent = Attempt.objects.get().request_headers
    assert [name for name, _ in shown.headers] == [name for name, _ in sent]
    placeholders = {"webhook-timestamp", "webhook-signature", "X-Api-Key"}
    assert [h for h in shown.headers if h[0] not in placeholders] == [
        tuple(h) for h in sent if h[0] not in placeholders
    ]
