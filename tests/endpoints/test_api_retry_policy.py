"""Retry policy through the API: endpoints and merchants take and answer
retry_schedule, max_attempts and timeout_seconds; values past the operator's
bounds are a 422 naming the bound, and write nothing."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint, Merchant
from tests.support import factories
from tests.support.api import assert_problem

pytestmark = pytest.mark.django_db
HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def bounds(settings):
    settings.RETRY_MAX_ATTEMPTS_LIMIT = 20
    settings.RETRY_MAX_WINDOW_SECONDS = 3600
    settings.HTTP_TIMEOUT_MAX_SECONDS = 30


def test_an_endpoint_is_made_and_answered_with_its_policy(any_key, merchant):
    response = any_key.post(
        "/merchants/acme/endpoints",
        {
            "url": HOOK,
            "retry_schedule": [1, 2],
            "max_attempts": 3,
            "timeout_seconds": 5,
        },
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["retry_schedule"], body["max_attempts"], body["timeout_seconds"]) == (
        [1, 2],
        3,
        5.0,
    )
    assert Endpoint.objects.get().retry_schedule == [1, 2]


def test_null_in_a_change_clears_the_endpoints_own_values(any_key, merchant):
    endpoint = factories.endpoint(merchant, retry_schedule=[5], timeout_seconds=3)

    response = any_key.patch(
        f"/merchants/acme/endpoints/{endpoint.pk}",
        {"retry_schedule": None, "timeout_seconds": None},
    )

    assert response.status_code == 200, response.content
    assert (response.json()["retry_schedule"], response.json()["timeout_seconds"]) == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("body", "field", "bound"),
    [
        ({"max_attempts": 21}, "max_attempts", "RETRY_MAX_ATTEMPTS_LIMIT"),
        ({"timeout_seconds": 31}, "timeout_seconds", "HTTP_TIMEOUT_MAX_SECONDS"),
        (
            {"retry_schedule": [600], "max_attempts": 8},
            "retry_schedule",
            "RETRY_MAX_WINDOW_SECONDS",
        ),
    ],
)
def test_values_past_the_bounds_are_a_422_naming_the_bound(
    any_key, merchant, body, field, bound
):
    response = any_key.post("/merchants/acme/endpoints", {"url": HOOK, **body})

    problem = assert_problem(response, 422, ["body", field])
    assert bound in str(problem["errors"])
    assert not Endpoint.objects.exists()


def test_a_change_whose_window_with_the_merchants_default_is_too_long_is_a_422(
    any_key, merchant
):
    Merchant.objects.filter(pk=merchant.pk).update(max_attempts=10)
    endpoint = factories.endpoint(merchant)

    response = any_key.patch(
        f"/merchants/acme/endpoints/{endpoint.pk}", {"retry_schedule": [600]}
    )

    problem = assert_problem(response, 422, ["body", "retry_schedule"])
    assert "RETRY_MAX_WINDOW_SECONDS" in str(problem["errors"])
    assert Endpoint.objects.get().retry_schedule is None


def test_a_merchant_is_made_with_defaults_and_changed_by_platform_keys(platform):
    response = platform.post(
        "/merchants",
        {"slug": "initech", "name": "Initech", "retry_schedule": [5, 30]},
    )
    assert response.status_code == 201, response.content
    assert response.json()["retry_schedule"] == [5, 30]

    response = platform.patch(
        "/merchants/initech", {"max_attempts": 4, "timeout_seconds": 2}
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["retry_schedule"], body["max_attempts"], body["timeout_seconds"]) == (
        [5, 30],
        4,
        2.0,
    )


def test_a_merchant_default_past_a_bound_is_a_422_naming_it(platform, merchant):
    response = platform.patch("/merchants/acme", {"max_attempts": 21})

    problem = assert_problem(response, 422, ["body", "max_attempts"])
    assert "RETRY_MAX_ATTEMPTS_LIMIT" in str(problem["errors"])
    assert Merchant.objects.get().max_attempts is None


def test_a_merchant_default_that_stretches_an_endpoints_window_is_a_422(
    platform, merchant
):
    factories.endpoint(merchant, max_attempts=3)  # 2 waits of 2,000 s: too long

    response = platform.patch("/merchants/acme", {"retry_schedule": [2000]})

    problem = assert_problem(response, 422, ["body", "retry_schedule"])
    assert "RETRY_MAX_WINDOW_SECONDS" in str(problem["errors"])


def test_a_scoped_key_may_not_change_its_merchants_defaults(scoped, merchant):
    response = scoped.patch("/merchants/acme", {"max_attempts": 2})

    assert_problem(response, 403)
    assert Merchant.objects.get().max_attempts is None
