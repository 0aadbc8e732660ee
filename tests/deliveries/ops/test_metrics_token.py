"""METRICS_TOKEN: /metrics answers only the bearer of the token, when one is set."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

TOKEN = "s3cret-scrape-token-0123456789"


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer wrong-token",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"Basic {TOKEN}",
        TOKEN,
    ],
)
def test_without_the_token_metrics_is_a_401_problem_that_reads_nothing(
    client, token, authorization
):
    headers = {} if authorization is None else {"Authorization": authorization}
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/metrics", headers=headers)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    problem = response.json()
    assert problem["status"] == 401
    assert "METRICS_TOKEN" in problem["detail"]
    assert "relay_" not in response.content.decode()
    assert len(queries) == 0


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_the_token_opens_metrics(client, token, scheme):
    response = client.get("/metrics", headers={"Authorization": f"{scheme} {TOKEN}"})

    assert response.status_code == 200
    assert b"relay_deliveries_total" in response.content


def test_without_a_token_set_metrics_stays_open(client, settings):
    settings.METRICS_TOKEN = ""

    response = client.get("/metrics")

    assert response.status_code == 200
    assert b"relay_deliveries_total" in response.content
