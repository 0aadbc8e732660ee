"""Two dispatchers run their maintenance step at the same moment: the endpoint
is disabled once and said once (one operational event, one email queued).

The test holds the maintenance slot's row so both dispatchers queue on it,
then lets them go together, rather than hoping they collide.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from deliveries.models import Event
from deliveries.notifications.models import MaintenanceSlot, OutgoingEmail
from deliveries.notifications.operational import operational_merchant
from deliveries.notifications.step import CHECK_SLOT
from endpoints.models import Endpoint, Membership
from relayproject.lib.clock import utcnow
from tests.deliveries.notifications.conftest import failures
from tests.support import factories
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]


def waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction pg_stat_activity is a snapshot: take a new one.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_two_dispatchers_disable_once_and_say_it_once(dispatchers):
    merchant = factories.merchant("acme")
    owner = User.objects.create_user("olivia", email="olivia@acme.test")
    Membership.objects.create(user=owner, merchant=merchant, role="owner")
    endpoint = factories.endpoint(merchant, url="http://127.0.0.1:9/down")
    factories.endpoint(operational_merchant(), url="http://127.0.0.1:9/ops")
    now = utcnow()
    failures(endpoint, start=now - timedelta(hours=130), end=now, count=25)
    MaintenanceSlot.objects.all().delete()
    MaintenanceSlot.objects.create(name=CHECK_SLOT)

    with transaction.atomic():
        MaintenanceSlot.objects.select_for_update().get(pk=CHECK_SLOT)
        started = [
            dispatchers.start("--drain", env={"EMAIL_URL": "dummymail://"})
            for _ in range(2)
        ]
        wait_until(
            lambda: waiting_on_locks() >= 2,
            timeout=60,
            what="both dispatchers waiting on the maintenance slot",
        )
    for process in started:
        assert process.wait(60) == 0, process.stderr[-2000:]
    # The slot let exactly one of them run the check (each logs when it does).
    ran = [p for p in started if "endpoint check: looked at" in p.stderr]
    assert len(ran) == 1, [p.stderr[-2000:] for p in started]

    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.disabled_by == "auto-disable"
    said = Event.objects.filter(
        merchant__slug="relay.operational", type="relay.endpoint.disabled"
    )
    assert said.count() == 1
    assert OutgoingEmail.objects.filter(kind="disabled").count() == 1
    assert Endpoint.objects.filter(pk=endpoint.pk, is_active=False).count() == 1
