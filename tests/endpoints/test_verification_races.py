"""Wrong pastes of one challenge made at once all count, on real PostgreSQL.

A third transaction holds the endpoint's row lock on purpose while two pastes
start, each on its own connection, and is released only once both are seen
waiting for it. Counting by reading the number and writing it back would let
both read the same number (a read takes no lock) and lose one of the two.
"""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from endpoints import verification
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_claiming_locks import WAIT, InThread
from tests.endpoints.test_quotas_races import _waiting_for_a_lock
from tests.support import factories
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def awaiting(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    return factories.endpoint()


def paste(endpoint: Endpoint, challenge: str) -> str:
    try:
        verification.endpoint_verify(
            endpoint=endpoint, challenge=challenge, by="merchant:a", now=utcnow()
        )
    except ValidationError as exc:
        (message,) = exc.message_dict["challenge"]
        return message
    return "verified"


def pastes_at_once(endpoint: Endpoint, *challenges: str) -> list[str]:
    """Each paste on its own connection, all let go at the same moment."""
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        with transaction.atomic():
            Endpoint.objects.select_for_update().get(pk=endpoint.pk)
            locked.set()
            assert release.wait(WAIT)

    holder = InThread(hold_the_row)
    assert locked.wait(WAIT)
    pastes = [InThread(lambda c=c: paste(endpoint, c)) for c in challenges]
    try:
        for other in pastes:
            assert other.connected.wait(WAIT)
        wait_until(
            lambda: all(_waiting_for_a_lock(p.backend_pid) for p in pastes),
            timeout=WAIT,
            what="every paste to wait for the row lock",
        )
    finally:
        release.set()
    holder.join()
    return sorted(p.join() for p in pastes)


def test_two_wrong_pastes_at_once_both_count(awaiting):
    told = pastes_at_once(awaiting, "vrfy_guess1", "vrfy_guess2")

    assert Endpoint.objects.get(pk=awaiting.pk).verification_wrong_answers == 2
    wrong = verification.WRONG_CHALLENGE
    assert told == [f"{wrong} 3 tries left.", f"{wrong} 4 tries left."]


def test_two_pastes_at_once_on_the_last_try_spend_it_once(awaiting):
    last = verification.WRONG_ANSWERS_LIMIT - 1
    Endpoint.objects.filter(pk=awaiting.pk).update(verification_wrong_answers=last)

    told = pastes_at_once(awaiting, "vrfy_guess1", "vrfy_guess2")

    row = Endpoint.objects.get(pk=awaiting.pk)
    assert row.verification_wrong_answers == verification.WRONG_ANSWERS_LIMIT
    assert verification.CHALLENGE_SPENT in told
    assert any("That was the last of its" in message for message in told)
