"""Ownership verification's rules: who must verify, what counts as an echo,
what a paste, a retry and a stale answer do."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from endpoints import verification
from endpoints.models import Endpoint
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = pytest.mark.django_db

CHALLENGE = "vrfy_abc"


@pytest.mark.parametrize(
    ("body", "echoes"),
    [
        (CHALLENGE, True),
        (f"  {CHALLENGE}\n", True),
        (CHALLENGE.encode(), True),
        (f'{{"challenge": "{CHALLENGE}"}}', True),
        (f'{{"challenge": "{CHALLENGE}x"}}', False),
        (f'{{"challenge": ["{CHALLENGE}"]}}', False),
        (f'["{CHALLENGE}"]', False),
        ("{not json", False),
        ("ok", False),
        ("", False),
        (None, False),
        (CHALLENGE[:-1], False),
        # Past ECHO_LIMIT_BYTES nothing is read: a body padded before it fails.
        (" " * 2000 + CHALLENGE, False),
    ],
)
def test_what_counts_as_an_echo(body, echoes):
    assert verification.echoed(body, CHALLENGE) is echoes


def test_no_challenge_matches_nothing():
    assert not verification.echoed("", None)
    assert not verification.challenge_matches(None, "")


@pytest.mark.parametrize(
    ("setting", "override", "required"),
    [
        (False, None, False),
        (True, None, True),
        (True, False, False),
        (False, True, True),
    ],
)
def test_the_merchant_override_beats_the_setting(settings, setting, override, required):
    settings.REQUIRE_ENDPOINT_VERIFICATION = setting
    merchant = factories.merchant()
    merchant.require_endpoint_verification = override
    merchant.save()
    endpoint = factories.endpoint(merchant)
    assert endpoint.awaiting_verification is required
    assert verification.state(endpoint) == ("awaiting" if required else "not_required")
    assert bool(endpoint.verification_challenge) is required


@pytest.fixture
def awaiting(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    return factories.endpoint()


def test_a_url_change_asks_again_with_a_new_challenge(awaiting):
    verification.endpoint_mark_verified(endpoint=awaiting, by="staff:x", now=utcnow())
    endpoint_update(endpoint=awaiting, description="other", now=utcnow())
    awaiting.refresh_from_db()
    assert verification.state(awaiting) == "verified"  # not the URL: still verified
    endpoint_update(endpoint=awaiting, url="http://127.0.0.1:9/new", now=utcnow())
    awaiting.refresh_from_db()
    assert verification.state(awaiting) == "awaiting"
    assert awaiting.verified_at is None and awaiting.verification_challenge


def test_a_wrong_paste_changes_nothing_and_a_right_one_verifies(awaiting):
    before = Endpoint.objects.filter(pk=awaiting.pk).values().get()
    with pytest.raises(ValidationError) as refused:
        verification.endpoint_verify(
            endpoint=awaiting, challenge="vrfy_guess", by="merchant:a", now=utcnow()
        )
    assert refused.value.message_dict == {"challenge": [verification.WRONG_CHALLENGE]}
    assert Endpoint.objects.filter(pk=awaiting.pk).values().get() == before
    verification.endpoint_verify(
        endpoint=awaiting,
        challenge=f" {awaiting.verification_challenge} ",
        by="merchant:a",
        now=utcnow(),
    )
    awaiting.refresh_from_db()
    assert verification.state(awaiting) == "verified"
    assert awaiting.verified_by == "merchant:a"
    assert awaiting.verification_challenge is None


def test_an_answer_to_a_replaced_challenge_verifies_nothing(awaiting):
    Endpoint.objects.filter(pk=awaiting.pk).update(verification_delivery_id="dlv_new")
    stale = [(awaiting.pk, awaiting.merchant_id, "dlv_old")]
    assert verification.endpoints_verified_by_echo(stale, now=utcnow()) == 0
    current = [(awaiting.pk, awaiting.merchant_id, "dlv_new")]
    assert verification.endpoints_verified_by_echo(current, now=utcnow()) == 1
    awaiting.refresh_from_db()
    assert awaiting.verified_by == verification.BY_RECEIVER


def test_a_retry_waits_its_turn_and_replaces_the_challenge(awaiting, settings):
    settings.VERIFICATION_RETRY_SECONDS = 60
    first = awaiting.verification_challenge
    with pytest.raises(verification.TooSoon) as soon:
        verification.verification_retry(endpoint=awaiting, now=utcnow())
    assert 0 < soon.value.retry_after <= 60
    later = utcnow() + timedelta(seconds=61)
    retried = verification.verification_retry(endpoint=awaiting, now=later)
    assert retried.verification_challenge != first
    assert retried.verification_delivery_id == ""  # the next dispatcher sends it


def test_nothing_to_retry_or_paste_once_verified(awaiting):
    verification.endpoint_mark_verified(endpoint=awaiting, by="staff:x", now=utcnow())
    with pytest.raises(verification.NotAwaiting):
        verification.verification_retry(endpoint=awaiting, now=utcnow())
    with pytest.raises(verification.NotAwaiting):
        verification.endpoint_verify(
            endpoint=awaiting, challenge="x", by="m", now=utcnow()
        )
    assert not verification.endpoint_mark_verified(
        endpoint=awaiting, by="staff:x", now=utcnow()
    )
