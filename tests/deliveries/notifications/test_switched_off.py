"""Switching the operational merchant off silences operational events; the
changes they would announce still happen."""

from __future__ import annotations

import pytest

from deliveries.notifications.operational import operational_merchant
from deliveries.notifications.watch import watch_run
from endpoints.models import Merchant
from endpoints.services import endpoint_disable
from tests.deliveries.notifications.conftest import T0, hours, said

pytestmark = pytest.mark.django_db


def test_a_switched_off_operational_merchant_says_nothing(endpoint, ops_endpoint):
    Merchant.objects.filter(pk=operational_merchant().pk).update(is_active=False)

    endpoint_disable(endpoint=endpoint, reason="by staff", by="staff:alice", now=T0)
    watch_run(now=T0 + hours(1))

    endpoint.refresh_from_db()
    assert not endpoint.is_active
    assert said() == []
