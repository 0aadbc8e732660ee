"""Endpoint `auth` and `tls` through the REST API (CONTRACT section 9): set on
create and change, shown without secrets on every answer, refused as 422s at
the field at fault with nothing written, and never shown back: no answer,
log line or column in clear holds a password, client secret or key."""

from __future__ import annotations

import logging

import pytest
from django.db import connection

from endpoints.models import Endpoint
from tests.support import client_certs
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.postgres

ENDPOINTS = "/merchants/acme/endpoints"
HOOK = "https://127.0.0.1:9/hook"
PASSWORD = "Basic-Pass-Okapi-4471"
CLIENT_SECRET = "Client-Secret-Narwhal-9902"
BASIC = {"type": "basic", "username": "relay", "password": PASSWORD}
OAUTH2 = {
    "type": "oauth2",
    "token_url": "https://127.0.0.1:8443/oauth/token",
    "client_id": "relay-client",
    "client_secret": CLIENT_SECRET,
    "scope": "hooks.write",
}


@pytest.fixture(scope="module")
def client():
    return client_certs.identity("api-client.example")


@pytest.fixture(autouse=True)
def _everything_logged(caplog):
    caplog.set_level(logging.DEBUG)


def create(api, **fields):
    return api.post(ENDPOINTS, {"url": HOOK, **fields})


def created(api, **fields) -> dict:
    response = create(api, **fields)
    assert response.status_code == 201, response.content
    return response.json()


def path_of(body: dict) -> str:
    return f"{ENDPOINTS}/{body['id']}"


def stored(body: dict) -> Endpoint:
    return Endpoint.objects.get(pk=body["id"])


def raw_columns(endpoint_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT auth_secret, tls_client_key, tls_client_cert, auth_settings::text"
            " FROM endpoints_endpoint WHERE id = %s",
            [endpoint_id],
        )
        return " ".join(str(value) for value in cursor.fetchone())


def credential_columns(endpoint: Endpoint) -> dict:
    return {
        name: getattr(endpoint, name)
        for name in (
            "auth_type",
            "auth_settings",
            "auth_secret",
            "tls_client_cert",
            "tls_client_key",
            "tls_ca_bundle",
            "tls_subject",
            "tls_not_after",
            "credentials_version",
            "headers",
        )
    }


def test_basic_auth_is_created_and_shown_without_its_password(any_key):
    body = created(any_key, auth=BASIC)

    assert body["auth"] == {"type": "basic", "username": "relay"}
    assert stored(body).auth_secret == PASSWORD
    assert PASSWORD not in raw_columns(body["id"])  # encrypted at rest


def test_oauth2_is_created_and_shown_without_its_client_secret(any_key):
    body = created(any_key, auth=OAUTH2)

    assert body["auth"] == {
        "type": "oauth2",
        "token_url": OAUTH2["token_url"],
        "client_id": "relay-client",
        "scope": "hooks.write",
        "audience": None,
    }
    assert CLIENT_SECRET not in raw_columns(body["id"])


def test_an_endpoint_without_either_answers_null(any_key):
    body = created(any_key)

    assert (body["auth"], body["tls"]) == (None, None)
    assert stored(body).credentials_version == ""


def test_a_client_certificate_is_shown_by_subject_and_expiry_never_the_key(
    any_key, client
):
    body = created(
        any_key,
        tls={
            "client_cert": client.chain,
            "client_key": client.key,
            "ca_bundle": client.ca,
        },
    )
    endpoint = stored(body)

    assert body["tls"]["subject"].startswith("CN=api-client.example")
    assert body["tls"]["not_after"] is not None
    assert body["tls"] | {"subject": None, "not_after": None} == {
        "subject": None,
        "not_after": None,
        "ca_bundle": True,
        "expires_soon": False,
        "expired": False,
    }
    assert endpoint.tls_client_key.startswith("-----BEGIN PRIVATE KEY-----")
    assert client_certs.key_body(endpoint.tls_client_key)[:40] not in raw_columns(
        body["id"]
    )


def test_get_and_list_carry_auth_and_tls(any_key, client):
    body = created(any_key, auth=BASIC, tls={"ca_bundle": client.ca})

    got = any_key.get(path_of(body)).json()
    listed = any_key.get(ENDPOINTS).json()["items"][0]

    for answer in (got, listed):
        assert answer["auth"] == {"type": "basic", "username": "relay"}
        assert answer["tls"]["ca_bundle"] is True
        assert answer["tls"]["subject"] is None


def test_pkcs12_with_its_password_is_taken_on_patch(any_key, client):
    body = created(any_key)

    answer = any_key.patch(
        path_of(body),
        {"tls": {"pkcs12": client.pkcs12("p12-pw"), "password": "p12-pw"}},
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["tls"]["subject"].startswith("CN=api-client.example")


def test_an_expired_certificate_is_taken_and_answered_as_expired(any_key):
    import datetime as dt

    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    expired = client_certs.identity(
        not_before=past - dt.timedelta(days=9), not_after=past
    )

    body = created(
        any_key, tls={"client_cert": expired.chain, "client_key": expired.key}
    )

    assert (body["tls"]["expired"], body["tls"]["expires_soon"]) == (True, False)


def bad_tls_cases(client) -> dict[str, tuple[dict, list[str]]]:
    other = client_certs.identity("other.example")
    server_only = client_certs.self_signed(usages=client_certs.SERVER_ONLY)
    return {
        "mismatched key": (
            {"client_cert": client.chain, "client_key": other.key},
            ["body", "tls", "client_key"],
        ),
        "encrypted key": (
            {"client_cert": client.chain, "client_key": client.encrypted_key("pp")},
            ["body", "tls", "client_key"],
        ),
        "garbage pem": (
            {
                "client_cert": "-----BEGIN CERTIFICATE-----\nxx\n",
                "client_key": client.key,
            },
            ["body", "tls", "client_cert"],
        ),
        "chain too big": (
            {"client_cert": client.chain * 6, "client_key": client.key},
            ["body", "tls", "client_cert"],
        ),
        "wrong pkcs12 password": (
            {"pkcs12": client.pkcs12("right"), "password": "wrong"},
            ["body", "tls", "pkcs12"],
        ),
        "server-only certificate": (
            {"client_cert": server_only.chain, "client_key": server_only.key},
            ["body", "tls", "client_cert"],
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "mismatched key",
        "encrypted key",
        "garbage pem",
        "chain too big",
        "wrong pkcs12 password",
        "server-only certificate",
    ],
)
def test_bad_tls_is_a_422_at_the_field_and_writes_nothing(
    platform, merchant, client, case
):
    value, loc = bad_tls_cases(client)[case]
    before = row_counts()

    response = create(platform, tls=value)

    body = assert_problem(response, 422, loc)
    assert row_counts() == before
    assert client_certs.key_body(client.key)[:40] not in str(body)


def test_a_private_token_url_is_refused_like_an_endpoint_url(
    platform, merchant, settings
):
    body = created(platform)
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False

    response = platform.patch(path_of(body), {"auth": OAUTH2})

    problem = assert_problem(response, 422, ["body", "auth", "token_url"])
    assert "private or loopback" in str(problem["errors"])
    assert stored(body).auth_type == ""


def test_a_broker_endpoint_refuses_auth_and_tls(platform, merchant, settings, client):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq"]
    before = row_counts()

    response = create(
        platform,
        kind="rabbitmq",
        url="amqp://127.0.0.1:5672/orders",
        target={"exchange": "", "routing_key": "orders"},
        auth=BASIC,
        tls={"ca_bundle": client.ca},
    )

    assert_problem(response, 422, ["body", "auth"])
    assert_problem(response, 422, ["body", "tls"])
    assert row_counts() == before


def test_a_change_to_a_broker_kind_must_remove_auth(platform, merchant, settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq"]
    body = created(platform, auth=BASIC)
    to_broker = {
        "kind": "rabbitmq",
        "url": "amqp://127.0.0.1:5672/orders",
        "target": {"exchange": "", "routing_key": "orders"},
    }

    refused = platform.patch(path_of(body), to_broker)
    taken = platform.patch(path_of(body), {**to_broker, "auth": None})

    assert_problem(refused, 422, ["body", "auth"])
    assert taken.status_code == 200, taken.content
    assert taken.json()["auth"] is None


def test_an_authorization_header_beside_auth_is_a_422_naming_it(platform, merchant):
    response = create(platform, auth=BASIC, headers={"Authorization": "Bearer x"})

    problem = assert_problem(response, 422, ["body", "auth"])
    assert "Authorization" in str(problem["errors"])


def test_adding_an_authorization_header_to_an_endpoint_with_auth_is_refused(
    platform, merchant
):
    body = created(platform, auth=BASIC)

    response = platform.patch(path_of(body), {"headers": {"authorization": "x"}})

    assert_problem(response, 422, ["body", "headers"])


def test_the_credentials_version_changes_on_every_change(platform, merchant, client):
    body = created(platform, auth=BASIC)
    path = path_of(body)
    versions = [stored(body).credentials_version]

    for change in (
        {"auth": {"type": "basic", "username": "relay2"}},
        {"tls": {"client_cert": client.chain, "client_key": client.key}},
        {"auth": OAUTH2},
        {"auth": None},
    ):
        assert platform.patch(path, change).status_code == 200
        versions.append(stored(body).credentials_version)
    assert platform.patch(path, {"description": "unrelated"}).status_code == 200
    unrelated = stored(body).credentials_version
    assert platform.patch(path, {"tls": None}).status_code == 200

    assert len(set(versions)) == len(versions) and all(versions)
    assert unrelated == versions[-1]
    assert stored(body).credentials_version == ""


def test_a_patch_without_the_password_keeps_it(platform, merchant):
    body = created(platform, auth=BASIC)

    answer = platform.patch(
        path_of(body), {"auth": {"type": "basic", "username": "relay2"}}
    )

    assert answer.json()["auth"] == {"type": "basic", "username": "relay2"}
    assert stored(body).auth_secret == PASSWORD


def test_a_new_token_url_needs_the_client_secret_again(platform, merchant):
    body = created(platform, auth=OAUTH2)
    moved = {k: v for k, v in OAUTH2.items() if k != "client_secret"}
    moved["token_url"] = "https://127.0.0.1:9443/token"

    response = platform.patch(path_of(body), {"auth": moved})

    assert_problem(response, 422, ["body", "auth", "client_secret"])
    assert stored(body).auth_settings["token_url"] == OAUTH2["token_url"]


def test_a_failed_patch_changes_nothing(platform, merchant, client):
    body = created(platform, auth=BASIC, tls={"ca_bundle": client.ca})
    before = credential_columns(stored(body))

    response = platform.patch(
        path_of(body),
        {
            "auth": OAUTH2,  # valid on its own
            "tls": {"client_cert": client.chain},  # no key
            "description": "changed",
        },
    )

    assert_problem(response, 422, ["body", "tls", "client_key"])
    after = stored(body)
    assert credential_columns(after) == before
    assert after.description == ""


def test_no_secret_reaches_any_answer_or_log_line(platform, merchant, client, caplog):
    other = client_certs.identity("other.example")
    secrets = [
        PASSWORD,
        CLIENT_SECRET,
        "p12-secret-pw",
        client_certs.key_body(client.key)[:40],
        client_certs.key_body(other.key)[:40],
    ]
    answers = [
        create(platform, auth=BASIC),
        create(
            platform,
            auth=OAUTH2,
            tls={"client_cert": client.chain, "client_key": client.key},
        ),
        create(platform, auth={**BASIC, "username": "a:b"}),
        create(platform, auth={**OAUTH2, "token_url": "ftp://x"}),
        create(platform, tls={"client_cert": client.chain, "client_key": other.key}),
        create(
            platform,
            tls={"pkcs12": client.pkcs12("p12-secret-pw"), "password": "wrong"},
        ),
        create(
            platform,
            tls={"client_cert": client.chain + other.key, "client_key": other.key},
        ),
    ]
    answers.append(platform.get(ENDPOINTS))

    seen = " ".join(a.content.decode() for a in answers) + caplog.text
    for secret in secrets:
        assert secret not in seen
