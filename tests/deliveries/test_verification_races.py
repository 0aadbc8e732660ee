"""Two dispatchers looking at one endpoint awaiting verification at once make
one challenge delivery, not two (a second would be an orphan, sent unasked as
an ordinary event once the endpoint is verified). Real PostgreSQL, a second
transaction opened on purpose while the first is still open."""

from __future__ import annotations

import pytest
from django.db import transaction

from deliveries.models import Delivery, Event
from deliveries.notifications.operational import ENDPOINT_VERIFICATION
from deliveries.verification import verification_make
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from tests.endpoints.test_quotas_races import _race
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_dispatchers_make_one_challenge_delivery(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    endpoint = factories.endpoint()

    def make():
        with transaction.atomic():
            return verification_make(
                endpoint_id=endpoint.pk, merchant_id=endpoint.merchant_id, now=utcnow()
            )

    first, second = _race(make, make)

    assert first and second == ""
    assert Event.objects.filter(type=ENDPOINT_VERIFICATION).count() == 1
    (only,) = Delivery.objects.filter(endpoint=endpoint)
    assert Endpoint.objects.get(pk=endpoint.pk).verification_delivery_id == only.pk
