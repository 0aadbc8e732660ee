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


def paste(endpoint, challenge: str) -> str:
    """What a paste is told: its refusal, or "verified"."""
    try:
        verification.endpoint_verify(
            endpoint=endpoint, challenge=challenge, by="merchant:a", now=utcnow()
        )
    except ValidationError as exc:
        (message,) = exc.message_dict["challenge"]
        return message
    return "verified"


def test_a_wrong_paste_spends_a_try_only_and_a_right_one_verifies(awaiting):
    before = Endpoint.objects.filter(pk=awaiting.pk).values().get()
    told = paste(awaiting, "vrfy_guess")
    assert told == f"{verification.WRONG_CHALLENGE} 4 tries left."
    after = Endpoint.objects.filter(pk=awaiting.pk).values().get()
    assert after == {**before, "verification_wrong_answers": 1}
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


def test_wrong_pastes_spend_the_challenge_until_a_new_one(awaiting, settings):
    settings.VERIFICATION_RETRY_SECONDS = 0
    limit = verification.WRONG_ANSWERS_LIMIT
    told = [paste(awaiting, f"vrfy_guess{n}") for n in range(limit)]
    assert told[-2] == f"{verification.WRONG_CHALLENGE} 1 try left."
    assert told[-1].endswith(
        f"That was the last of its {limit} tries: ask for a new challenge and "
        "paste that one."
    )
    # Spent: even the right challenge is refused, and counts no further.
    assert paste(awaiting, awaiting.verification_challenge) == (
        verification.CHALLENGE_SPENT
    )
    awaiting.refresh_from_db()
    assert awaiting.awaiting_verification
    assert awaiting.verification_wrong_answers == limit
    assert verification.tries_left(awaiting) == 0

    retried = verification.verification_retry(endpoint=awaiting, now=utcnow())
    assert retried.verification_wrong_answers == 0
    assert paste(awaiting, retried.verification_challenge) == "verified"


def test_the_right_paste_on_the_last_try_verifies(awaiting):
    for n in range(verification.WRONG_ANSWERS_LIMIT - 1):
        paste(awaiting, f"vrfy_guess{n}")
    assert paste(awaiting, awaiting.verification_challenge) == "verified"
    awaiting.refresh_from_db()
    assert awaiting.verification_wrong_answers == 0


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
