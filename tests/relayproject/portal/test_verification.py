"""Verification in the portal: the state is shown, a pasted challenge
verifies, a wrong one is shown under its field with the tries left and
changes nothing else, a spent challenge says a new one is needed, and
another merchant's owner can neither verify nor retry."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints import verification
from endpoints.models import Endpoint, Membership
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def awaiting(settings, world):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    return factories.endpoint(world.mine.merchant)


def url(endpoint, name="portal:endpoint_verification"):
    return reverse(name, args=[endpoint.merchant.slug, endpoint.pk])


def test_the_detail_page_says_it_waits_for_verification(client, world, awaiting):
    client.force_login(world.viewer)
    page = client.get(
        reverse("portal:endpoint_detail", args=["acme", awaiting.pk])
    ).content.decode()
    assert "waiting for verification" in page
    assert awaiting.verification_challenge not in page  # never shown back


def test_pasting_the_challenge_verifies(client, world, awaiting):
    client.force_login(world.owner)
    response = client.post(
        url(awaiting), {"challenge": awaiting.verification_challenge}
    )
    assert response.status_code == 302
    awaiting.refresh_from_db()
    assert verification.state(awaiting) == "verified"
    assert awaiting.verified_by.startswith("merchant:")


def test_a_wrong_challenge_is_shown_under_its_field(client, world, awaiting):
    client.force_login(world.owner)
    before = Endpoint.objects.filter(pk=awaiting.pk).values().get()
    response = client.post(url(awaiting), {"challenge": "vrfy_guess"})
    assert response.status_code == 400
    page = response.content.decode()
    field = page[page.index('data-field="challenge"') :]
    said = field[: field.index("</div>")]
    assert f"{verification.WRONG_CHALLENGE} 4 tries left." in said
    assert 'id="challenge-errors"' in page
    assert "4 of 5 tries left for this challenge" in page
    after = Endpoint.objects.filter(pk=awaiting.pk).values().get()
    assert after == {**before, "verification_wrong_answers": 1}


def test_a_spent_challenge_says_a_new_one_is_needed(client, world, awaiting):
    client.force_login(world.owner)
    limit = verification.WRONG_ANSWERS_LIMIT
    Endpoint.objects.filter(pk=awaiting.pk).update(verification_wrong_answers=limit)
    page = client.get(url(awaiting)).content.decode()
    assert "can no longer be pasted: send a new challenge" in page
    response = client.post(
        url(awaiting), {"challenge": awaiting.verification_challenge}
    )
    assert response.status_code == 400
    assert verification.CHALLENGE_SPENT in response.content.decode()
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification


@pytest.mark.parametrize("slug", ["acme", "globex"])
def test_another_merchants_owner_can_neither_verify_nor_retry(
    client, world, awaiting, slug
):
    """Under acme's slug (no membership) or under their own (acme's endpoint
    id named from globex's portal): 404 both ways, nothing changes."""
    rival = world.theirs.merchant.membership_set.get().user
    client.force_login(rival)
    challenge = awaiting.verification_challenge
    before = Endpoint.objects.filter(pk=awaiting.pk).values().get()
    for name, data in (
        ("portal:endpoint_verification", {"challenge": challenge}),
        ("portal:endpoint_verification_retry", {}),
    ):
        response = client.post(reverse(name, args=[slug, awaiting.pk]), data)
        assert response.status_code == 404
    assert Endpoint.objects.filter(pk=awaiting.pk).values().get() == before


def test_a_viewer_cannot_verify(client, world, awaiting):
    client.force_login(world.viewer)
    challenge = awaiting.verification_challenge
    assert client.post(url(awaiting), {"challenge": challenge}).status_code == 403
    awaiting.refresh_from_db()
    assert awaiting.awaiting_verification


def test_a_retry_too_soon_says_when(client, world, awaiting, settings):
    settings.VERIFICATION_RETRY_SECONDS = 60
    client.force_login(world.owner)
    first = awaiting.verification_challenge
    response = client.post(
        url(awaiting, "portal:endpoint_verification_retry"), follow=True
    )
    assert "less than 60 s ago" in response.content.decode()
    awaiting.refresh_from_db()
    assert awaiting.verification_challenge == first
    settings.VERIFICATION_RETRY_SECONDS = 0
    client.post(url(awaiting, "portal:endpoint_verification_retry"))
    awaiting.refresh_from_db()
    assert awaiting.verification_challenge != first
    assert verification.state(awaiting) == "awaiting"


def test_a_developer_may_verify(client, world, awaiting):
    developer = user_with_role(world.mine.merchant, Membership.Role.DEVELOPER, "dev")
    client.force_login(developer)
    client.post(url(awaiting), {"challenge": awaiting.verification_challenge})
    assert not Endpoint.objects.get(pk=awaiting.pk).awaiting_verification
    assert utcnow() >= Endpoint.objects.get(pk=awaiting.pk).verified_at


def test_a_new_endpoint_is_said_to_wait_for_verification(client, world, settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    client.force_login(world.owner)
    response = client.post(
        reverse("portal:endpoint_create", args=["acme"]),
        {"url": "http://127.0.0.1:9/new", "description": ""},
        follow=True,
    )
    page = response.content.decode()
    assert "It receives nothing until it is verified" in page
    assert "waiting for verification" in page
