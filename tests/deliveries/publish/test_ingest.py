"""Publishing: fan-out to subscribed endpoints, atomically, as an outbox."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import transaction

from deliveries.dispatch.wakeup import PostgresWaker
from deliveries.models import Delivery, Event
from deliveries.services import event_publish
from endpoints.matching import subscribes_to
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories


@pytest.mark.parametrize(
    ("patterns", "event_type", "expected"),
    [
        ([], "anything.at.all", True),
        (["payment.captured"], "payment.captured", True),
        (["payment.captured"], "payment.refunded", False),
        (["payment.*"], "payment.captured", True),
        (["payment.*"], "payment.card.declined", True),
        (["payment.*"], "payment", False),
        (["payment.*"], "payments.captured", False),
        (["order.created", "payment.*"], "order.created", True),
        (["Payment.captured"], "payment.captured", False),
    ],
)
def test_event_type_matching(patterns, event_type, expected):
    assert subscribes_to(patterns, event_type) is expected


@pytest.mark.django_db
def test_an_event_fans_out_to_every_active_subscribed_endpoint():
    merchant = factories.merchant()
    everything = factories.endpoint(merchant)
    payments = factories.endpoint(merchant, event_types=["payment.*"])
    factories.endpoint(merchant, event_types=["order.created"])
    disabled = factories.endpoint(merchant)
    endpoint_update(endpoint=disabled, is_active=False, now=utcnow())
    factories.endpoint()  # another merchant's

    event = event_publish(merchant=merchant, type="payment.captured", data={"a": 1})

    targets = set(
        Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True)
    )
    assert targets == {everything.pk, payments.pk}
    assert {d.endpoint_id for d in event.created_deliveries} == targets


@pytest.mark.django_db(transaction=True)
def test_publishing_inside_a_rolled_back_transaction_leaves_nothing():
    endpoint = factories.endpoint()

    with pytest.raises(RuntimeError), transaction.atomic():
        event_publish(merchant=endpoint.merchant, type="a", data={})
        raise RuntimeError("the caller's own work failed")

    assert not Event.objects.exists()
    assert not Delivery.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_commit_wakes_an_idle_dispatcher_through_notify():
    endpoint = factories.endpoint()
    waker = PostgresWaker()
    woke = threading.Event()
    waker.start(woke.set)
    assert waker.listening.wait(10)  # subscribed, as a running dispatcher is
    started = time.monotonic()
    event_publish(merchant=endpoint.merchant, type="a", data={})
    woke.wait(timeout=30)
    waker.close()

    assert woke.is_set()
    assert time.monotonic() - started < 30, "woke by timeout, not by NOTIFY"


@pytest.mark.django_db
def test_an_event_aimed_at_one_endpoint_ignores_its_type_filter_but_not_disabling():
    merchant = factories.merchant()
    aimed = factories.endpoint(merchant, event_types=["order.created"])
    factories.endpoint(merchant)  # subscribes to all, but is not aimed at
    disabled = factories.endpoint(merchant)
    endpoint_update(endpoint=disabled, is_active=False, now=utcnow())

    event = event_publish(
        merchant=merchant,
        type="relay.test",
        data={},
        endpoint_ids=[aimed.pk, disabled.pk],
    )

    assert [d.endpoint_id for d in event.created_deliveries] == [aimed.pk]
