"""In-process publishing refuses a merchant staff switched off, as the API does."""

from __future__ import annotations

import pytest

from deliveries.services import EventInput, event_publish, events_publish
from endpoints.models import Merchant
from endpoints.switched_off import MerchantSwitchedOff
from tests.support import factories
from tests.support.api import row_counts

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def test_event_publish_refuses_it_whatever_the_instance_says():
    endpoint = factories.endpoint()
    merchant = endpoint.merchant  # still says is_active=True
    Merchant.objects.filter(pk=merchant.pk).update(is_active=False)
    before = row_counts()

    with pytest.raises(MerchantSwitchedOff, match="is switched off by staff"):
        event_publish(merchant=merchant, type="order.paid", data={})

    assert row_counts() == before


def test_the_events_carry_the_instance_given():
    merchant = factories.endpoint().merchant
    events = events_publish(
        merchant=merchant, events=[EventInput("a", {}), EventInput("b", {})]
    )
    assert [e.merchant for e in events] == [merchant, merchant]
    assert all(e.merchant is merchant for e in events)
