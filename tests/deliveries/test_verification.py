"""The relay.endpoint.verification event: made once per challenge, carrying
no challenge in the stored row, an earlier pending one ended."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.models import Delivery, Event
from deliveries.verification import (
    SUPERSEDED,
    challenges_of,
    verification_make,
    verifications_due,
)
from endpoints import verification
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def awaiting(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    return factories.endpoint()


def make(endpoint, now):
    return verification_make(
        endpoint_id=endpoint.pk, merchant_id=endpoint.merchant_id, now=now
    )


def test_made_once_with_no_challenge_in_the_event(awaiting):
    now = utcnow()
    assert verifications_due(now=now) == [(awaiting.pk, awaiting.merchant_id, "")]
    delivery_id = make(awaiting, now)
    assert make(awaiting, now) == ""  # made: nothing more to make
    awaiting.refresh_from_db()
    assert awaiting.verification_delivery_id == delivery_id
    event = Event.objects.get(deliveries__pk=delivery_id)
    assert event.type == "relay.endpoint.verification"
    assert "challenge" not in event.data
    assert event.data["endpoint"]["id"] == awaiting.pk
    assert challenges_of({delivery_id}) == {
        delivery_id: awaiting.verification_challenge
    }
    due = [(awaiting.pk, awaiting.merchant_id, delivery_id)]
    assert verifications_due(now=now) == due


def test_a_new_challenge_ends_the_pending_delivery_of_the_old_one(awaiting):
    now = utcnow()
    old = make(awaiting, now)
    later = now + timedelta(seconds=3600)
    verification.verification_retry(endpoint=awaiting, now=later)
    new = make(awaiting, later)
    assert new and new != old
    ended = Delivery.objects.get(pk=old)
    assert (ended.status, ended.last_error) == ("dead", SUPERSEDED)
    assert challenges_of({old}) == {}  # its challenge no longer counts
    assert Delivery.objects.get(pk=new).status == "pending"


def test_verified_or_never_asked_endpoints_are_not_due(awaiting, settings):
    verification.endpoint_mark_verified(endpoint=awaiting, by="staff:x", now=utcnow())
    settings.REQUIRE_ENDPOINT_VERIFICATION = False
    factories.endpoint()
    assert verifications_due(now=utcnow()) == []
