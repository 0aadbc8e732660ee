"""U+0000 anywhere in a request is refused cleanly: PostgreSQL cannot hold it."""

from __future__ import annotations

import pytest
from django.test import Client

from endpoints.apikeys import apikey_create
from tests.support import factories


@pytest.fixture
def client(db) -> Client:
    factories.merchant("acme")
    return Client(headers={"Authorization": f"Bearer {apikey_create(name='k')[1]}"})


@pytest.mark.parametrize(
    ("path", "status", "loc"),
    [
        ("/api/v1/deliveries?merchant=a%00b", 422, ["query", "merchant"]),
        ("/api/v1/deliveries?endpoint_id=a%00b", 422, ["query", "endpoint_id"]),
        ("/api/v1/deliveries?cursor=%00", 422, ["query", "cursor"]),
        ("/api/v1/merchants/a%00b", 404, None),
        ("/api/v1/events/evt%00x", 404, None),
        ("/api/v1/deliveries/d%00x", 404, None),
    ],
)
def test_nul_in_a_path_or_query_is_a_clear_client_error(client, path, status, loc):
    response = client.get(path)

    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    if loc:
        assert response.json()["errors"][0]["loc"] == loc


def test_nul_in_an_idempotency_key_is_refused(client):
    response = client.post(
        "/api/v1/events",
        data='{"merchant": "acme", "type": "a", "data": {}}',
        content_type="application/json",
        headers={"Idempotency-Key": "a\x00b"},
    )

    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][0] == "header"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        # Escaped: NUL, a lone surrogate, a key with NUL.
        (b'{"merchant": "acme", "type": "a", "data": {"x": "a\\u0000"}}', "x"),
        (b'{"merchant": "acme", "type": "a", "data": {"x": ["\\ud800"]}}', 0),
        (b'{"merchant": "acme", "type": "a", "data": {"k\\u0000": 1}}', "k\x00"),
        # Raw: a surrogate's UTF-8 form, which json.loads lets through.
        (b'{"merchant": "acme", "type": "a", "data": {"x": "\xed\xa0\x80"}}', "x"),
    ],
    ids=["escaped-nul", "escaped-surrogate", "nul-in-key", "raw-surrogate"],
)
def test_an_unstorable_string_anywhere_in_the_body_is_refused(client, body, loc):
    response = client.post("/api/v1/events", data=body, content_type="application/json")

    assert response.status_code == 422, response.content
    # Refused by the body's check (relayproject/api.py), before any schema.
    assert response.json()["errors"] == [
        {
            "loc": [*response.json()["errors"][0]["loc"][:-1], loc],
            "msg": "Contains U+0000 or a lone surrogate.",
        }
    ]


def test_a_surrogate_pair_escaped_is_an_ordinary_character(client):
    response = client.post(
        "/api/v1/events",
        data=b'{"merchant": "acme", "type": "a", "data": {"x": "\\ud83d\\ude00"}}',
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
