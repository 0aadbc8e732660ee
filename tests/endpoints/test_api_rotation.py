"""rotate-secret with the overlap the request names: 0 stops the old secret at
once, a longer one keeps it signing until then, out of bounds is a 422."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from endpoints.selectors import live_secrets
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.django_db
MS = timedelta(milliseconds=1)


def rotate(api, endpoint, body=None):
    return api.post(f"/merchants/acme/endpoints/{endpoint.pk}/rotate-secret", body)


def expiry_answered(response) -> datetime:
    """previous_expires_at as a datetime (the API writes milliseconds)."""
    return datetime.fromisoformat(response.json()["previous_expires_at"])


def signing(endpoint) -> list[str]:
    return live_secrets(endpoint_ids=[endpoint.pk], now=utcnow())[endpoint.pk]


def test_overlap_0_leaves_only_the_new_secret_signing(any_key, merchant):
    endpoint = factories.endpoint(merchant)
    before = utcnow()

    response = rotate(any_key, endpoint, {"overlap_seconds": 0})

    assert response.status_code == 200
    new = response.json()["secret"]
    assert before - MS < expiry_answered(response) <= utcnow()
    assert signing(endpoint) == [new]


def test_overlap_of_2_days_keeps_the_old_secret_signing_until_then(any_key, merchant):
    endpoint = factories.endpoint(merchant)
    old = endpoint.secrets.get().secret
    before = utcnow()

    response = rotate(any_key, endpoint, {"overlap_seconds": 2 * 86400})

    assert response.status_code == 200
    until = endpoint.secrets.get(expires_at__isnull=False).expires_at
    assert before + timedelta(days=2) <= until <= utcnow() + timedelta(days=2)
    assert until - MS < expiry_answered(response) <= until
    assert signing(endpoint) == [response.json()["secret"], old]


@pytest.mark.parametrize("body", [None, {}, {"overlap_seconds": None}])
def test_no_overlap_named_is_the_settings(platform, merchant, settings, body):
    settings.SECRET_ROTATION_OVERLAP_SECONDS = 3600
    endpoint = factories.endpoint(merchant)
    before = utcnow()

    response = rotate(platform, endpoint, body)

    until = expiry_answered(response)
    assert before + timedelta(hours=1) - MS < until <= utcnow() + timedelta(hours=1)


@pytest.mark.parametrize(
    ("overlap", "bound"),
    [(-1, "Must be at least 0."), (604801, "Must be at most 604800.")],
)
def test_an_overlap_out_of_bounds_is_a_422_naming_the_bound(
    any_key, merchant, overlap, bound
):
    endpoint = factories.endpoint(merchant)
    before = row_counts()

    response = rotate(any_key, endpoint, {"overlap_seconds": overlap})

    problem = assert_problem(response, 422, ["body", "overlap_seconds"])
    assert problem["errors"][0]["msg"] == bound
    assert row_counts() == before
    assert endpoint.secrets.get().expires_at is None
