"""Two browsers opening one portal link at once: exactly one gets in.

The first redeem is held open inside its transaction (its UPDATE done, not
committed); a second redeem runs on its own connection and is seen blocked on
the row lock (or finished, which is what happens without the conditional
UPDATE); then the first commits.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction

from endpoints import portal_links
from endpoints.models import PortalLink
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def redeem_or_reason(token: str) -> str:
    try:
        portal_links.portal_link_redeem(token=token, now=utcnow())
    except portal_links.LinkRefused as exc:
        return exc.reason
    return "opened"


def blocked_or_done(other: InThread) -> None:
    """Until `other` waits for a row lock, or has finished without one."""
    deadline = time.monotonic() + WAIT
    while other.thread.is_alive() and time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                [other.backend_pid],
            )
            row = cursor.fetchone()
        if row and row[0] == "Lock":
            return
        other.thread.join(0.01)  # a bounded poll, not a wait for timing


def test_of_two_racing_redeems_exactly_one_opens_the_portal():
    _, token = portal_links.portal_link_create(
        merchant=factories.merchant("acme"),
        role="developer",
        created_by="test",
        now=utcnow(),
    )

    with transaction.atomic():
        first = redeem_or_reason(token)
        second = InThread(lambda: redeem_or_reason(token))
        second.connected.wait(WAIT)
        blocked_or_done(second)
    assert (first, second.join()) == ("opened", "used")
    assert PortalLink.objects.get().used_at is not None
