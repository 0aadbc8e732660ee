"""Operational events about pull endpoints: an ended listen session is no
disabled endpoint to announce; a pull endpoint's dead letters are announced
as any endpoint's."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.notifications.deadletters import (
    dead_letters_announce,
    dead_letters_collect,
)
from deliveries.notifications.models import MaintenanceSlot
from deliveries.notifications.operational import DELIVERY_DEAD, ENDPOINT_DISABLED
from deliveries.notifications.watch import endpoints_to_watch, watch_run
from deliveries.pull.acks import messages_nack
from deliveries.pull.leasing import messages_lease
from deliveries.pull.sessions import session_end, session_start
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.deliveries.notifications.conftest import ops_endpoint, said  # noqa: F401
from tests.deliveries.pull.support import publish, pull_endpoint
from tests.support import factories

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


@pytest.fixture(autouse=True)
def _fresh_slots(db, settings):
    # The migration marks its own "now" as seen; these tests read from theirs.
    MaintenanceSlot.objects.all().delete()
    settings.OPERATIONAL_COALESCE_SECONDS = 60


def test_an_ended_listen_session_is_not_announced_as_disabled(ops_endpoint):  # noqa: F811
    now = utcnow()
    session = session_start(merchant=factories.merchant(), now=now)
    session_end(endpoint=session, why="idle", now=now)
    pull = pull_endpoint()
    endpoint_disable(endpoint=pull, reason="paused by the merchant", by="api", now=now)

    assert endpoints_to_watch() == [pull.pk]
    watch_run(now=now + timedelta(minutes=1))

    assert [e.data["endpoint"]["id"] for e in said(ENDPOINT_DISABLED)] == [pull.pk]


def test_a_pull_endpoints_dead_letters_are_announced(ops_endpoint):  # noqa: F811
    endpoint = pull_endpoint(max_attempts=1)
    [pk] = publish(endpoint, 1)
    now = utcnow()
    messages_lease(endpoint=endpoint, limit=1, now=now)
    assert messages_nack(endpoint=endpoint, ids=[pk], now=now).done == [pk]

    dead_letters_collect(now=now + timedelta(seconds=5))
    assert dead_letters_announce(now=now + timedelta(seconds=61)) == [endpoint.pk]

    (event,) = said(DELIVERY_DEAD)
    assert (event.data["count"], event.data["first_delivery_id"]) == (1, pk)
