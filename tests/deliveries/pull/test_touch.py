"""A pull notes when it happened (and keeps a listen session alive) at most
once a second: a consumer polling an empty endpoint does not write its row
on every poll."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.pull.sessions import TOUCH_EVERY_SECONDS, pull_touch, session_start
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.deliveries.pull.support import pull_endpoint
from tests.support import factories

pytestmark = pytest.mark.both_backends


def pulled(endpoint) -> tuple:
    return EndpointHealth.objects.values_list(
        "last_pulled_at", "session_expires_at"
    ).get(endpoint_id=endpoint.pk)


@pytest.mark.django_db
def test_a_pull_endpoint_notes_a_pull_once_a_second():
    endpoint = pull_endpoint()
    first = utcnow()
    pull_touch(endpoint=endpoint, now=first)
    pull_touch(endpoint=endpoint, now=first + timedelta(seconds=0.5))
    assert pulled(endpoint)[0] == first
    later = first + timedelta(seconds=TOUCH_EVERY_SECONDS + 0.1)
    pull_touch(endpoint=endpoint, now=later)
    assert pulled(endpoint)[0] == later


@pytest.mark.django_db
def test_a_session_is_kept_alive_by_a_pull_a_second_later():
    now = utcnow()
    session = session_start(merchant=factories.merchant(), now=now)
    pull_touch(endpoint=session, now=now)
    _, expires = pulled(session)
    pull_touch(endpoint=session, now=now + timedelta(seconds=0.2))
    assert pulled(session)[1] == expires
    pull_touch(endpoint=session, now=now + timedelta(seconds=5))
    assert pulled(session)[1] == expires + timedelta(seconds=5)
