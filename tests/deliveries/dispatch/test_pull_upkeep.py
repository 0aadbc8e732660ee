"""The dispatchers' maintenance runs the pull upkeep (deliveries/pull/expiry.py)
about once a second, on its clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.dispatch.maintenance import PULL_EVERY_SECONDS, PullUpkeep
from deliveries.models import Delivery
from deliveries.pull.leasing import messages_lease
from tests.deliveries.pull.support import VISIBILITY, publish, pull_endpoint
from tests.support.fakes import FakeClock

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def test_the_pull_upkeep_runs_once_per_second_of_the_dispatchers_clock():
    clock = FakeClock()
    upkeep = PullUpkeep(clock=clock)
    endpoint = pull_endpoint()
    publish(endpoint, 2, now=clock.now())
    messages_lease(endpoint=endpoint, limit=1, now=clock.now())
    expired = clock.advance(VISIBILITY + 1)

    upkeep(expired)  # the first call runs at once
    assert Delivery.objects.filter(status="pending").count() == 2
    messages_lease(endpoint=endpoint, limit=2, now=expired)
    later = expired + timedelta(seconds=VISIBILITY + 1)

    upkeep(later)  # within the second: not run
    assert Delivery.objects.filter(status="delivering").count() == 2

    clock.advance(PULL_EVERY_SECONDS)
    upkeep(later)
    assert Delivery.objects.filter(status="pending").count() == 2
