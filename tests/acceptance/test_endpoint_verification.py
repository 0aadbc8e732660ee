"""Endpoint ownership verification with a real dispatcher process and real
loopback receivers: an endpoint awaiting verification receives its signed
challenge and nothing else (its deliveries wait, spending no attempt) until
its receiver echoes the challenge, or the merchant pastes it in the portal;
then they arrive in publish order. A URL change asks again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse
from standardwebhooks.webhooks import Webhook

from deliveries.models import Delivery
from deliveries.ops.held import HeldKind, delivery_held
from deliveries.services import event_publish
from endpoints.catalogue import schema_problems
from endpoints.models import Membership
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.fakes import Received, Receiver, Reply
from tests.support.portal import user_with_role
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

VERIFICATION = "relay.endpoint.verification"
FAST = {"RETRY_BASE_SECONDS": "0.05", "RETRY_MAX_DELAY_SECONDS": "0.2"}


def echo(request: Received) -> Reply:
    body = request.json
    if body["type"] == VERIFICATION:
        return Reply(200, body["data"]["challenge"].encode())
    return Reply(200)


def types(receiver: Receiver) -> list[str]:
    return [r.json["type"] for r in receiver.received]


def ordinary(receiver: Receiver) -> list[int]:
    return [
        r.json["data"]["n"] for r in receiver.received if r.json["type"] != VERIFICATION
    ]


def publish(merchant, count: int, start: int = 0) -> None:
    # One event per call: each its own created_at, so "publish order" is exact.
    for n in range(start, start + count):
        event_publish(merchant=merchant, type="order.paid", data={"n": n}, now=utcnow())


def merchant_requiring_verification():
    merchant = factories.merchant()
    merchant.require_endpoint_verification = True  # the per-merchant override
    merchant.save()
    return merchant


def test_a_receiver_that_does_not_echo_gets_only_challenges_until_pasted(
    dispatchers, client
):
    with Receiver() as rx:  # answers 200 "ok" to everything
        merchant = merchant_requiring_verification()
        endpoint = factories.endpoint(merchant, url=rx.url, max_in_flight=1)
        secret = endpoint.secrets.get().secret
        publish(merchant, 5)
        dispatchers.start("--concurrency", "1", env=FAST)

        # Retried (a 2xx without the challenge is a failed attempt) ...
        wait_until(lambda: len(rx.received) >= 3, timeout=60, what="3 challenges")
        assert set(types(rx)) == {VERIFICATION}
        first = rx.received[0]
        headers = {k.lower(): v for k, v in first.headers.items()}
        body = Webhook(secret).verify(first.body, headers)  # raises if forged
        assert body["data"]["endpoint"]["id"] == endpoint.pk
        assert body["data"]["challenge"].startswith("vrfy_")
        # What a receiver gets is what the catalogue documents.
        assert schema_problems(type=VERIFICATION, data=body["data"]) == []
        # ... and nothing else: the ordinary deliveries wait, unspent.
        endpoint.refresh_from_db()
        assert endpoint.awaiting_verification
        waiting = Delivery.objects.filter(endpoint=endpoint).exclude(
            pk=endpoint.verification_delivery_id
        )
        assert [d.attempt_count for d in waiting] == [0] * 5
        assert {d.status for d in waiting} == {"pending"}
        held = delivery_held(
            delivery=waiting.select_related("endpoint")[0], now=utcnow()
        )
        assert held.reason == HeldKind.AWAITING_VERIFICATION
        # The challenge is stored encrypted, and in no event row in clear.
        challenge = body["data"]["challenge"]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT verification_challenge FROM endpoints_endpoint WHERE id = %s",
                [endpoint.pk],
            )
            (stored,) = cursor.fetchone()
            cursor.execute(
                "SELECT count(*) FROM deliveries_event WHERE data::text LIKE %s",
                ["%" + challenge + "%"],
            )
            (in_events,) = cursor.fetchone()
        assert challenge not in stored
        assert in_events == 0
        assert ordinary(rx) == []

        # The merchant pastes the challenge from the receiver's log into the
        # portal: the held deliveries go out, in publish order, one attempt each.
        client.force_login(user_with_role(merchant, Membership.Role.DEVELOPER, "d"))
        pasted = client.post(
            reverse("portal:endpoint_verification", args=[merchant.slug, endpoint.pk]),
            {"challenge": rx.received[-1].json["data"]["challenge"]},
        )
        assert pasted.status_code == 302
        wait_until(lambda: len(ordinary(rx)) >= 5, timeout=60, what="5 events")
        assert ordinary(rx) == list(range(5))
        wait_until(
            lambda: not waiting.exclude(status="succeeded").exists(),
            timeout=30,
            what="every held delivery recorded",
        )
        assert set(waiting.values_list("attempt_count", flat=True)) == {1}


def test_an_echoing_receiver_is_verified_and_gets_the_held_events_in_order(
    dispatchers,
):
    with Receiver(echo) as rx, Receiver() as moved_to:
        merchant = merchant_requiring_verification()
        endpoint = factories.endpoint(merchant, url=rx.url, max_in_flight=1)
        publish(merchant, 8)
        dispatchers.start("--concurrency", "1", env=FAST)

        wait_until(lambda: len(ordinary(rx)) >= 8, timeout=60, what="8 events")
        assert types(rx)[0] == VERIFICATION
        assert ordinary(rx) == list(range(8))  # in publish order
        endpoint.refresh_from_db()
        assert not endpoint.awaiting_verification
        assert endpoint.verified_by == "receiver"
        assert endpoint.verification_challenge is None
        deliveries = Delivery.objects.filter(endpoint=endpoint)
        wait_until(
            lambda: not deliveries.exclude(status="succeeded").exists(),
            timeout=30,
            what="every delivery recorded",
        )
        # One attempt each: the wait spent none.
        assert set(deliveries.values_list("attempt_count", flat=True)) == {1}

        # A new URL proves itself again before it gets anything.
        endpoint_update(endpoint=endpoint, url=moved_to.url, now=utcnow())
        endpoint.refresh_from_db()
        assert endpoint.awaiting_verification and endpoint.verified_at is None
        publish(merchant, 3, start=8)
        wait_until(
            lambda: len(moved_to.received) >= 2, timeout=60, what="new challenges"
        )
        assert set(types(moved_to)) == {VERIFICATION}
        old = rx.received[0].json["data"]["challenge"]
        assert moved_to.received[0].json["data"]["challenge"] != old
        assert len(ordinary(rx)) == 8  # the old URL got nothing more either
        endpoint.refresh_from_db()
        assert endpoint.awaiting_verification
