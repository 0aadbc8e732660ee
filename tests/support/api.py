"""Helpers for the REST API tests: keys, an authenticated client, row counts.

The fixtures (merchant, platform, scoped, any_key, ...) are shared by every
folder through tests/conftest.py."""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.test import Client

from endpoints.apikeys import apikey_create
from endpoints.models import Merchant
from tests.support import factories

PROBLEM = "application/problem+json"


class Api:
    """A Django test client that speaks JSON with a bearer key."""

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.client = Client()

    def call(self, method: str, path: str, body=None, *, headers=None, **kwargs):
        headers = dict(headers or {})
        if self.key:
            headers.setdefault("Authorization", f"Bearer {self.key}")
        data = kwargs.pop("raw", None)
        if body is not None:
            data = json.dumps(body)
        if data is not None:
            kwargs.setdefault("content_type", "application/json")
        return self.client.generic(
            method, f"/api/v1{path}", data or "", headers=headers, **kwargs
        )

    def get(self, path: str, **kwargs):
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body=None, **kwargs):
        return self.call("POST", path, body, **kwargs)

    def patch(self, path: str, body=None, **kwargs):
        return self.call("PATCH", path, body, **kwargs)

    def delete(self, path: str, **kwargs):
        return self.call("DELETE", path, **kwargs)


def api_as(merchant: Merchant | None) -> Api:
    _, full_key = apikey_create(name="test", merchant=merchant)
    return Api(full_key)


@pytest.fixture
def merchant(db) -> Merchant:
    return factories.merchant("acme")


@pytest.fixture
def other_merchant(db) -> Merchant:
    return factories.merchant("globex")


@pytest.fixture
def platform(db) -> Api:
    return api_as(None)


@pytest.fixture
def scoped(merchant) -> Api:
    return api_as(merchant)


@pytest.fixture(params=["platform", "scoped"])
def any_key(request, merchant) -> Api:
    """Each test runs once with a platform key and once with acme's scoped key."""
    return api_as(None if request.param == "platform" else merchant)


def row_counts() -> dict[str, int]:
    """Rows in every table of our apps, to show a failed request wrote nothing."""
    return {
        model._meta.label: model._default_manager.count()
        for app in ("endpoints", "deliveries")
        for model in apps.get_app_config(app).get_models()
        if not model._meta.proxy
    }


def assert_problem(response, status: int, loc: list | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    body = response.json()
    assert set(body) == {"type", "title", "status", "detail", "errors"}
    assert body["status"] == status
    if loc is not None:
        assert loc in [e["loc"] for e in body["errors"]], body["errors"]
    return body
