"""A merchant switched off by staff gets nothing sent, with a real dispatcher
process and real loopback receivers: its due deliveries are held (the held
reason says why), spend no attempt, and arrive once it is switched on."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from deliveries.services import event_publish
from endpoints.models import Merchant
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import api_as
from tests.support.fakes import Receiver
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]


def publish(merchant, count: int) -> list[str]:
    events = [
        event_publish(merchant=merchant, type="order.paid", data={"n": n}, now=utcnow())
        for n in range(count)
    ]
    return [e.created_deliveries[0].pk for e in events]


def switch(merchant: Merchant, *, on: bool) -> None:
    Merchant.objects.filter(pk=merchant.pk).update(is_active=on)


def test_a_switched_off_merchant_receives_nothing_until_switched_on(dispatchers):
    with Receiver() as off_rx, Receiver() as other_rx:
        off = factories.merchant()
        factories.endpoint(off, url=off_rx.url)
        held = publish(off, 3)  # published while on; due before the other's
        switch(off, on=False)
        other = factories.merchant()
        factories.endpoint(other, url=other_rx.url)
        (sent,) = publish(other, 1)
        # One send at a time, in claim order: had the claim taken the held
        # rows, the first would reach its receiver before the other's row.
        dispatchers.start("--concurrency", "1")

        wait_until(
            lambda: Delivery.objects.filter(pk=sent, status="succeeded").exists(),
            timeout=60,
            what="the other merchant's delivery",
        )
        assert off_rx.received == []
        rows = Delivery.objects.filter(pk__in=held)
        assert set(rows.values_list("status", "attempt_count")) == {("pending", 0)}
        shown = api_as(None).get(f"/deliveries/{held[0]}").json()["held"]
        assert shown["reason"] == "merchant_disabled"
        assert "merchant is switched off" in shown["text"]

        switch(off, on=True)
        wait_until(
            lambda: rows.filter(status="succeeded").count() == 3,
            timeout=60,
            what="the held deliveries, once switched on",
        )
        assert len(off_rx.received) == 3
        # One attempt each: the hold spent none.
        assert set(rows.values_list("attempt_count", flat=True)) == {1}
