"""The bad-input table: status, problem+json shape, the field named, nothing written."""

from __future__ import annotations

import json

import pytest

from deliveries.services import event_publish
from endpoints.apikeys import apikey_create, apikey_revoke
from endpoints.models import ApiKey
from tests.support import factories
from tests.support.api import Api, assert_problem, row_counts

pytestmark = pytest.mark.django_db

EVENT = {"merchant": "acme", "type": "order.created", "data": {"n": 1}}


def _event(**changes) -> dict:
    return {**EVENT, **changes}


def _revoked_key() -> str:
    key, full_key = apikey_create(name="old")
    apikey_revoke(key=key)
    return full_key


# (case, method, path, key: "platform" | None | callable, request kwargs, status, loc)
CASES = [
    ("no key", "POST", "/events", None, {"body": EVENT}, 401, None),
    (
        "wrong key",
        "POST",
        "/events",
        lambda: "rk_nothing_here",
        {"body": EVENT},
        401,
        None,
    ),
    ("revoked key", "POST", "/events", _revoked_key, {"body": EVENT}, 401, None),
    (
        "wrong content type",
        "POST",
        "/events",
        "platform",
        {"raw": json.dumps(EVENT), "content_type": "text/plain"},
        415,
        None,
    ),
    (
        "malformed JSON",
        "POST",
        "/events",
        "platform",
        {"raw": '{"merchant": "acme",'},
        400,
        None,
    ),
    (
        "NaN, which JSON does not have",
        "POST",
        "/events",
        "platform",
        {"raw": '{"merchant": "acme", "type": "a", "data": {"x": NaN}}'},
        400,
        None,
    ),
    (
        "a number too large for a float",
        "POST",
        "/events",
        "platform",
        {"raw": '{"merchant": "acme", "type": "a", "data": {"x": 1e400}}'},
        400,
        None,
    ),
    (
        "a chunked body, whose size cannot be checked first",
        "POST",
        "/events",
        "platform",
        {"body": EVENT, "headers": {"Transfer-Encoding": "chunked"}},
        411,
        None,
    ),
    (
        "JSON array",
        "POST",
        "/events",
        "platform",
        {"body": [EVENT]},
        422,
        ["body"],
    ),
    (
        "missing type",
        "POST",
        "/events",
        "platform",
        {"body": {"merchant": "acme", "data": {}}},
        422,
        ["body", "type"],
    ),
    (
        "bad type pattern",
        "POST",
        "/events",
        "platform",
        {"body": _event(type="order..created")},
        422,
        ["body", "type"],
    ),
    (
        "type over 255 characters",
        "POST",
        "/events",
        "platform",
        {"body": _event(type="a" * 256)},
        422,
        ["body", "type"],
    ),
    (
        "unknown merchant",
        "POST",
        "/events",
        "platform",
        {"body": _event(merchant="nobody")},
        404,
        ["body", "merchant"],
    ),
    (
        "data over the size limit",
        "POST",
        "/events",
        "platform",
        {"body": _event(data={"blob": "x" * 262_144})},
        413,
        None,
    ),
    (
        "batch over 500",
        "POST",
        "/events/batch",
        "platform",
        {"body": {"events": [EVENT] * 501}},
        422,
        ["body", "events"],
    ),
    (
        "batch with one bad item",
        "POST",
        "/events/batch",
        "platform",
        {"body": {"events": [EVENT, EVENT, EVENT, {**EVENT, "type": "no spaces"}]}},
        422,
        ["body", "events", 3, "type"],
    ),
    (
        "batch with one unknown merchant",
        "POST",
        "/events/batch",
        "platform",
        {"body": {"events": [EVENT, _event(merchant="nobody")]}},
        404,
        ["body", "events", 1, "merchant"],
    ),
    (
        "idempotency key over 255 characters",
        "POST",
        "/events",
        "platform",
        {"body": EVENT, "headers": {"Idempotency-Key": "k" * 256}},
        422,
        ["header", "Idempotency-Key"],
    ),
    (
        "same idempotency key with another body",
        "POST",
        "/events",
        "platform",
        {"body": _event(data={"n": 2}), "headers": {"Idempotency-Key": "used"}},
        422,
        ["header", "Idempotency-Key"],
    ),
    (
        "endpoint URL refused by the destination policy",
        "POST",
        "/merchants/acme/endpoints",
        "platform",
        {"body": {"url": "http://169.254.169.254/latest/meta-data"}},
        422,
        ["body", "url"],
    ),
    (
        "endpoint URL that is not http",
        "POST",
        "/merchants/acme/endpoints",
        "platform",
        {"body": {"url": "ftp://example.com/hook"}},
        422,
        ["body", "url"],
    ),
    (
        "NUL character in a merchant name",
        "POST",
        "/merchants",
        "platform",
        {"body": {"slug": "nul", "name": "a\x00b"}},
        422,
        ["body", "name"],
    ),
    (
        "NUL character deep in event data",
        "POST",
        "/events",
        "platform",
        {"body": _event(data={"list": ["ok", {"k": "\x00"}]})},
        422,
        ["body", "data", "list", 1, "k"],
    ),
    (
        "lone surrogate in event data",
        "POST",
        "/events",
        "platform",
        {"body": _event(data={"list": ["ok", {"k": "a\ud800b"}]})},
        422,
        ["body", "data", "list", 1, "k"],
    ),
    (
        "lone low surrogate in a key of event data",
        "POST",
        "/events",
        "platform",
        {"body": _event(data={"x\udc00": 1})},
        422,
        ["body", "data", "x\udc00"],
    ),
    (
        "lone surrogate in a merchant name",
        "POST",
        "/merchants",
        "platform",
        {"body": {"slug": "sur", "name": "\udfff"}},
        422,
        ["body", "name"],
    ),
    (
        "bad cursor",
        "GET",
        "/deliveries?cursor=%%%",
        "platform",
        {},
        422,
        ["query", "cursor"],
    ),
]


@pytest.fixture
def world(settings):
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    event_publish(
        merchant=merchant,
        type="order.created",
        data={"n": 1},
        idempotency_key="used",
        idempotency_scope="platform",
    )
    _, platform_key = apikey_create(name="platform")
    # The destination policy is what these cases test, so it is on here.
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    return platform_key


@pytest.mark.parametrize(
    ("method", "path", "key", "kwargs", "status", "loc"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_input_is_refused_and_writes_nothing(
    world, method, path, key, kwargs, status, loc
):
    raw_key = world if key == "platform" else key() if callable(key) else None
    before = row_counts()
    last_used = dict(ApiKey.objects.values_list("pk", "revoked_at"))
    response = Api(raw_key).call(method, path, **kwargs)
    assert_problem(response, status, loc)
    assert row_counts() == before
    assert dict(ApiKey.objects.values_list("pk", "revoked_at")) == last_used


def test_401_asks_for_a_bearer_key(db):
    response = Api(None).get("/deliveries")
    assert_problem(response, 401)
    assert response["WWW-Authenticate"] == "Bearer"


def test_one_422_names_every_bad_field_including_a_refused_url(world):
    before = row_counts()

    response = Api(world).post(
        "/merchants/acme/endpoints",
        {"url": "http://10.0.0.1/hook", "event_types": "x", "max_attempts": "a"},
    )

    assert_problem(response, 422)
    errors = {tuple(e["loc"]): e["msg"] for e in response.json()["errors"]}
    assert set(errors) == {
        ("body", "url"),
        ("body", "event_types"),
        ("body", "max_attempts"),
    }
    assert "private or loopback address" in errors[("body", "url")]
    assert row_counts() == before
