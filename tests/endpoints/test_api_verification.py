"""The verification operations of the REST API: retry and paste, their
problem answers, and another merchant's key (404, nothing written)."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from endpoints.verification import CHALLENGE_SPENT, WRONG_ANSWERS_LIMIT
from tests.support import factories
from tests.support.api import api_as, assert_problem, row_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def awaiting(settings, merchant):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    settings.VERIFICATION_RETRY_SECONDS = 60
    return factories.endpoint(merchant)


def path(endpoint, tail):
    return f"/merchants/acme/endpoints/{endpoint.pk}/{tail}"


def test_the_endpoint_says_its_verification_state(scoped, awaiting):
    body = scoped.get(f"/merchants/acme/endpoints/{awaiting.pk}").json()
    assert body["verification"]["state"] == "awaiting"
    assert body["verification"]["verified_at"] is None
    assert "challenge" not in str(body)  # the challenge is never shown back


def test_a_retry_too_soon_is_a_429_with_retry_after(scoped, awaiting):
    before = row_counts()
    response = scoped.post(path(awaiting, "verification"))
    assert_problem(response, 429)
    assert 1 <= int(response["Retry-After"]) <= 60
    assert row_counts() == before


def test_a_retry_sends_a_new_challenge(scoped, awaiting, settings):
    settings.VERIFICATION_RETRY_SECONDS = 0
    first = awaiting.verification_challenge
    response = scoped.post(path(awaiting, "verification"))
    assert response.status_code == 202, response.content
    assert response.json()["verification"]["state"] == "awaiting"
    awaiting.refresh_from_db()
    assert awaiting.verification_challenge != first


def test_a_wrong_challenge_is_a_422_on_its_field(scoped, awaiting):
    response = scoped.post(path(awaiting, "verify"), {"challenge": "vrfy_guess"})
    body = assert_problem(response, 422, loc=["body", "challenge"])
    assert body["errors"][0]["msg"].endswith("4 tries left.")
    awaiting.refresh_from_db()
    assert awaiting.awaiting_verification


def refusal(response) -> str:
    (error,) = assert_problem(response, 422, loc=["body", "challenge"])["errors"]
    return error["msg"]


def test_guesses_are_limited_per_challenge(scoped, awaiting, settings):
    """After WRONG_ANSWERS_LIMIT wrong answers even the right one is refused,
    until a new challenge is asked for."""
    verify = path(awaiting, "verify")
    told = [
        refusal(scoped.post(verify, {"challenge": f"vrfy_guess{n}"}))
        for n in range(WRONG_ANSWERS_LIMIT)
    ]
    assert [msg.split(". ", 1)[1] for msg in told[:-1]] == [
        "4 tries left.",
        "3 tries left.",
        "2 tries left.",
        "1 try left.",
    ]
    assert "last of its 5 tries: ask for a new challenge" in told[-1]
    right = {"challenge": awaiting.verification_challenge}
    assert refusal(scoped.post(verify, right)) == CHALLENGE_SPENT
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification

    settings.VERIFICATION_RETRY_SECONDS = 0
    assert scoped.post(path(awaiting, "verification")).status_code == 202
    awaiting.refresh_from_db()
    response = scoped.post(verify, {"challenge": awaiting.verification_challenge})
    assert response.status_code == 200, response.content
    assert response.json()["verification"]["state"] == "verified"


def test_the_right_challenge_verifies(scoped, awaiting):
    challenge = awaiting.verification_challenge
    response = scoped.post(path(awaiting, "verify"), {"challenge": challenge})
    assert response.status_code == 200, response.content
    assert response.json()["verification"]["state"] == "verified"
    assert response.json()["verification"]["verified_by"] == "api:test"


def test_nothing_to_verify_is_a_409(scoped, merchant):
    endpoint = factories.endpoint(merchant)  # verification not required
    assert_problem(scoped.post(path(endpoint, "verification")), 409)
    assert_problem(scoped.post(path(endpoint, "verify"), {"challenge": "x"}), 409)


@pytest.mark.parametrize("slug", ["acme", "globex"])
def test_another_merchants_key_cannot_retry_or_verify(awaiting, other_merchant, slug):
    """Under acme's slug, or acme's endpoint id under its own: 404, nothing written."""
    intruder = api_as(other_merchant)
    before = row_counts()
    challenge = awaiting.verification_challenge
    base = f"/merchants/{slug}/endpoints/{awaiting.pk}/"
    assert_problem(intruder.post(base + "verification"), 404)
    assert_problem(intruder.post(base + "verify", {"challenge": challenge}), 404)
    assert row_counts() == before
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification
