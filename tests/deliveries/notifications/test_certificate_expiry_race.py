"""Two dispatchers warning about one certificate at once say it once: the
mark (tls_expiry_warned_for) is a conditional UPDATE in the transaction that
publishes the event, so the second waits on the row and then finds it said.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.models import Event
from deliveries.notifications.certificates import certificate_warn
from deliveries.notifications.operational import (
    CERTIFICATE_EXPIRING,
    operational_merchant,
)
from endpoints.models import Endpoint
from tests.deliveries.notifications.conftest import T0
from tests.deliveries.notifications.test_races import race
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_at_once_say_one_certificate_once(settings):
    # Without the "not said yet" condition on the UPDATE, the second waits for
    # the first's commit, then marks the row again and publishes a second event.
    settings.CLIENT_CERT_EXPIRY_WARNING_DAYS = 14
    factories.endpoint(operational_merchant(), url="http://127.0.0.1:9/ops")
    endpoint = factories.endpoint(
        factories.merchant("acme"), url="http://127.0.0.1:9/acme"
    )
    not_after = T0 + timedelta(days=3)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        tls_client_cert="-----BEGIN CERTIFICATE-----\n...",
        tls_subject="CN=relay.acme.example",
        tls_not_after=not_after,
    )

    def warn() -> bool:
        # Both read the endpoint as due before either marked it: the race.
        return certificate_warn(
            endpoint_id=endpoint.pk,
            merchant_id=endpoint.merchant_id,
            not_after=not_after,
            now=T0,
        )

    assert race(warn, warn) == (True, False)
    assert Event.objects.filter(type=CERTIFICATE_EXPIRING).count() == 1
