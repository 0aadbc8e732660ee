"""Credentials go over https only (issue 42 review): a client certificate or
CA bundle always, auth unless RELAY_ALLOW_PRIVATE_DESTINATIONS. Refused as a
422 naming the part given, or the URL when it is what changed, on create and
on change, with nothing written."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from tests.support import client_certs
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.postgres

ENDPOINTS = "/merchants/acme/endpoints"
HTTPS_HOOK = "https://127.0.0.1:9/hook"
HTTP_HOOK = "http://127.0.0.1:9/hook"
PUBLIC_HTTP = "http://93.184.215.14/hook"  # an IP literal: no DNS
PUBLIC_HTTPS = "https://93.184.215.14/hook"
BASIC = {"type": "basic", "username": "relay", "password": "Https-Only-Pass-3381"}


@pytest.fixture(scope="module")
def client():
    return client_certs.identity("https-only.example")


def created(api, **fields) -> dict:
    response = api.post(ENDPOINTS, fields)
    assert response.status_code == 201, response.content
    return response.json()


def path_of(body: dict) -> str:
    return f"{ENDPOINTS}/{body['id']}"


def stored(body: dict) -> Endpoint:
    return Endpoint.objects.get(pk=body["id"])


@pytest.mark.parametrize("part", ["identity", "ca_bundle"])
def test_tls_on_an_http_url_is_refused_at_tls(platform, merchant, client, part):
    tls = (
        {"client_cert": client.chain, "client_key": client.key}
        if part == "identity"
        else {"ca_bundle": client.ca}
    )
    before = row_counts()

    response = platform.post(ENDPOINTS, {"url": HTTP_HOOK, "tls": tls})

    problem = assert_problem(response, 422, ["body", "tls"])
    assert "used only over https" in str(problem["errors"])
    assert row_counts() == before


def test_tls_added_to_an_http_endpoint_is_refused(platform, merchant, client):
    body = created(platform, url=HTTP_HOOK)

    response = platform.patch(path_of(body), {"tls": {"ca_bundle": client.ca}})

    assert_problem(response, 422, ["body", "tls"])
    assert stored(body).tls_ca_bundle == ""


def test_a_url_moved_to_http_under_tls_is_refused_at_url(platform, merchant, client):
    body = created(platform, url=HTTPS_HOOK, tls={"ca_bundle": client.ca})

    response = platform.patch(path_of(body), {"url": HTTP_HOOK})

    problem = assert_problem(response, 422, ["body", "url"])
    assert "client certificate or CA bundle" in str(problem["errors"])
    assert stored(body).url == HTTPS_HOOK


def test_a_url_moved_to_http_with_tls_removed_at_once_is_taken(
    platform, merchant, client
):
    body = created(platform, url=HTTPS_HOOK, tls={"ca_bundle": client.ca})

    response = platform.patch(path_of(body), {"url": HTTP_HOOK, "tls": None})

    assert response.status_code == 200, response.content
    assert (stored(body).url, stored(body).tls_ca_bundle) == (HTTP_HOOK, "")


def test_auth_on_an_http_url_is_refused_where_private_ones_are(
    platform, merchant, settings
):
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    before = row_counts()

    response = platform.post(ENDPOINTS, {"url": PUBLIC_HTTP, "auth": BASIC})

    problem = assert_problem(response, 422, ["body", "auth"])
    assert "in clear over http" in str(problem["errors"])
    assert BASIC["password"] not in str(problem)
    assert row_counts() == before


def test_a_url_moved_to_http_under_auth_is_refused_at_url(platform, merchant, settings):
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    body = created(platform, url=PUBLIC_HTTPS, auth=BASIC)

    response = platform.patch(path_of(body), {"url": PUBLIC_HTTP})

    problem = assert_problem(response, 422, ["body", "url"])
    assert "auth (a password or token)" in str(problem["errors"])
    assert stored(body).url == PUBLIC_HTTPS


def test_auth_over_http_is_taken_where_private_destinations_are_allowed(
    platform, merchant
):
    # Development and tests: receivers on loopback speak http.
    body = created(platform, url=HTTP_HOOK, auth=BASIC)

    assert stored(body).auth_type == "basic"


def test_an_unrelated_change_to_an_older_http_endpoint_with_tls_is_taken(
    platform, merchant, client
):
    # Stored before https was required: every other edit still works.
    body = created(platform, url=HTTPS_HOOK, tls={"ca_bundle": client.ca})
    Endpoint.objects.filter(pk=body["id"]).update(url=HTTP_HOOK)

    response = platform.patch(path_of(body), {"description": "billing"})

    assert response.status_code == 200, response.content
    assert stored(body).description == "billing"
