"""endpoints/client_credentials.py on unsaved endpoints: what auth and tls
accept, what they refuse (every problem at once, no value repeated), what
they store and show, and when the stored secret is kept."""

from __future__ import annotations

import datetime as dt

import pytest

from endpoints import client_certificates
from endpoints.client_credentials import (
    CredentialsInvalid,
    auth_set,
    auth_shown,
    credentials_clean,
    tls_set,
    tls_shown,
)
from endpoints.models import Endpoint
from tests.support import client_certs

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
PUBLIC_TOKEN_URL = "https://93.184.215.14/oauth/token"  # an IP literal: no DNS
OAUTH2 = {
    "type": "oauth2",
    "token_url": PUBLIC_TOKEN_URL,
    "client_id": "relay-client",
    "client_secret": "s3cret-client-value",
    "scope": "hooks.write hooks.read",
    "audience": "https://api.acme.example",
}


@pytest.fixture(scope="module")
def client():
    return client_certs.identity()


def http_endpoint() -> Endpoint:
    return Endpoint(kind="http", url="https://hooks.acme.example/in")


def refused(call, endpoint, value) -> dict[tuple[str, ...], str]:
    with pytest.raises(CredentialsInvalid) as caught:
        call(endpoint, value)
    return dict(caught.value.errors)


def test_basic_auth_is_set_and_shown_without_its_password():
    endpoint = http_endpoint()

    auth_set(endpoint, {"type": "basic", "username": "relay", "password": "pw-1"})

    assert (endpoint.auth_type, endpoint.auth_secret) == ("basic", "pw-1")
    assert auth_shown(endpoint) == {"type": "basic", "username": "relay"}
    assert endpoint.credentials_version


def test_oauth2_is_shown_with_everything_but_the_client_secret():
    endpoint = http_endpoint()

    auth_set(endpoint, OAUTH2)

    shown = auth_shown(endpoint)
    assert shown == {k: v for k, v in OAUTH2.items() if k != "client_secret"}
    assert "s3cret-client-value" not in repr(shown)


def test_a_basic_change_without_the_password_keeps_the_stored_one():
    endpoint = http_endpoint()
    auth_set(endpoint, {"type": "basic", "username": "relay", "password": "pw-1"})

    auth_set(endpoint, {"type": "basic", "username": "relay2"})

    assert endpoint.auth_secret == "pw-1"
    assert endpoint.auth_settings == {"username": "relay2"}


def test_an_oauth2_change_keeps_the_secret_only_for_the_same_token_url():
    endpoint = http_endpoint()
    auth_set(endpoint, OAUTH2)
    without_secret = {k: v for k, v in OAUTH2.items() if k != "client_secret"}

    auth_set(endpoint, {**without_secret, "scope": "hooks.write"})
    assert endpoint.auth_secret == "s3cret-client-value"

    moved = {**without_secret, "token_url": "https://93.184.215.15/token"}
    errors = refused(auth_set, endpoint, moved)
    assert "token URL stays the same" in errors[("client_secret",)]


def test_a_change_of_type_needs_the_secret_again():
    endpoint = http_endpoint()
    auth_set(endpoint, {"type": "basic", "username": "relay", "password": "pw-1"})
    without_secret = {k: v for k, v in OAUTH2.items() if k != "client_secret"}

    errors = refused(auth_set, endpoint, without_secret)

    assert errors == {("client_secret",): "Required."}
    assert endpoint.auth_type == "basic"  # nothing set on a refusal


@pytest.mark.parametrize(
    ("value", "loc"),
    [
        ({"type": "digest"}, ("type",)),
        ({"type": "basic", "username": "a:b", "password": "x"}, ("username",)),
        ({"type": "basic", "username": "a\nb", "password": "x"}, ("username",)),
        ({"type": "basic", "username": "u" * 201, "password": "x"}, ("username",)),
        ({"type": "basic", "username": "u", "password": "x\r\n"}, ("password",)),
        ({"type": "basic", "username": "u", "password": "x", "extra": 1}, ("extra",)),
        ({**OAUTH2, "client_id": "caf\u00e9"}, ("client_id",)),
        ({**OAUTH2, "scope": 'a "b"'}, ("scope",)),
        ({**OAUTH2, "scope": "a  b"}, ("scope",)),
        ({**OAUTH2, "audience": "has space"}, ("audience",)),
        ({**OAUTH2, "token_url": "ftp://93.184.215.14/t"}, ("token_url",)),
        ({**OAUTH2, "token_url": "x" * 2001}, ("token_url",)),
    ],
)
def test_bad_auth_is_refused_at_the_field_at_fault(value, loc):
    assert loc in refused(auth_set, http_endpoint(), value)


def test_every_auth_problem_is_listed_at_once():
    value = {**OAUTH2, "client_id": "", "scope": '"', "token_url": "nope"}

    errors = refused(auth_set, http_endpoint(), value)

    assert set(errors) == {("client_id",), ("scope",), ("token_url",)}


@pytest.mark.parametrize(
    "token_url",
    ["https://127.0.0.1/token", "https://10.1.2.3/token", "https://localhost/token"],
)
def test_a_private_token_url_is_refused_like_an_endpoint_url(settings, token_url):
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False

    errors = refused(auth_set, http_endpoint(), {**OAUTH2, "token_url": token_url})

    assert "private or loopback" in errors[("token_url",)]


def test_an_http_token_url_needs_private_destinations_allowed(settings):
    value = {**OAUTH2, "token_url": "http://93.184.215.14/token"}
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    assert "must be https" in refused(auth_set, http_endpoint(), value)[("token_url",)]

    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = True
    auth_set(http_endpoint(), value)


def test_no_auth_message_repeats_the_secret():
    secret = "pw\x00-do-not-echo"

    with pytest.raises(CredentialsInvalid) as caught:
        auth_set(
            http_endpoint(), {"type": "basic", "username": "u", "password": secret}
        )

    assert "do-not-echo" not in str(caught.value)


def test_null_removes_auth_and_tls_and_clears_the_version(client):
    endpoint = http_endpoint()
    auth_set(endpoint, {"type": "basic", "username": "u", "password": "p"})
    tls_set(endpoint, {"client_cert": client.chain, "client_key": client.key})

    auth_set(endpoint, None)
    tls_set(endpoint, {})

    assert (endpoint.auth_type, endpoint.auth_secret) == ("", None)
    assert (endpoint.tls_client_cert, endpoint.tls_client_key) == ("", None)
    assert auth_shown(endpoint) is None and tls_shown(endpoint, now=NOW) is None
    assert endpoint.credentials_version == ""


def test_a_certificate_and_key_are_stored_and_its_subject_and_expiry_shown(client):
    endpoint = http_endpoint()
    endpoint.tls_expiry_warned_for = NOW

    tls_set(endpoint, {"client_cert": client.chain, "client_key": client.key})

    assert endpoint.tls_subject.startswith("CN=client.example")
    assert endpoint.tls_expiry_warned_for is None
    shown = tls_shown(endpoint, now=dt.datetime.now(dt.UTC))
    assert shown["subject"] == endpoint.tls_subject
    assert shown["not_after"] == endpoint.tls_not_after
    assert (shown["ca_bundle"], shown["expired"], shown["expires_soon"]) == (
        False,
        False,
        False,
    )


def test_a_ca_bundle_alone_is_shown_without_a_subject(client):
    endpoint = http_endpoint()

    tls_set(endpoint, {"ca_bundle": client.ca})

    assert tls_shown(endpoint, now=NOW) == {
        "subject": None,
        "not_after": None,
        "ca_bundle": True,
        "expires_soon": False,
        "expired": False,
    }
    assert endpoint.credentials_version


def test_an_expired_certificate_is_accepted_and_shown_expired():
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    expired = client_certs.identity(
        not_before=past - dt.timedelta(days=30), not_after=past
    )
    endpoint = http_endpoint()

    tls_set(endpoint, {"client_cert": expired.chain, "client_key": expired.key})

    shown = tls_shown(endpoint, now=dt.datetime.now(dt.UTC))
    assert (shown["expired"], shown["expires_soon"]) == (True, False)


def test_expires_soon_follows_the_warning_window(settings, client):
    settings.CLIENT_CERT_EXPIRY_WARNING_DAYS = 14
    endpoint = http_endpoint()
    tls_set(endpoint, {"client_cert": client.chain, "client_key": client.key})
    not_after = endpoint.tls_not_after

    outside = tls_shown(endpoint, now=not_after - dt.timedelta(days=15))
    inside = tls_shown(endpoint, now=not_after - dt.timedelta(days=13))

    assert (outside["expires_soon"], inside["expires_soon"]) == (False, True)


def test_pkcs12_with_its_password_is_stored_as_pem(client):
    endpoint = http_endpoint()

    tls_set(endpoint, {"pkcs12": client.pkcs12("p12-pass"), "password": "p12-pass"})

    assert endpoint.tls_subject.startswith("CN=client.example")
    assert endpoint.tls_client_key.startswith("-----BEGIN PRIVATE KEY-----")
    assert endpoint.tls_client_cert.count("BEGIN CERTIFICATE") == 2


def test_pkcs12_with_a_wrong_password_is_refused(client):
    value = {"pkcs12": client.pkcs12("p12-pass"), "password": "wrong"}

    errors = refused(tls_set, http_endpoint(), value)

    assert "password is wrong" in errors[("pkcs12",)]


def test_a_key_that_is_not_the_leafs_is_refused(client):
    other = client_certs.identity("other.example")

    errors = refused(
        tls_set, http_endpoint(), {"client_cert": client.chain, "client_key": other.key}
    )

    assert errors == {
        ("client_key",): "The private key does not match the certificate."
    }


def test_an_encrypted_key_is_refused_with_what_to_do(client):
    value = {"client_cert": client.chain, "client_key": client.encrypted_key("pp")}

    errors = refused(tls_set, http_endpoint(), value)

    assert "encrypted with a passphrase" in errors[("client_key",)]


def test_garbage_pem_is_refused_on_both_fields():
    body = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"

    errors = refused(
        tls_set, http_endpoint(), {"client_cert": body, "client_key": "garbage"}
    )

    assert set(errors) == {("client_cert",), ("client_key",)}


def test_a_chain_too_big_is_refused(client):
    too_many = client.chain * 6  # 12 certificates

    errors = refused(
        tls_set, http_endpoint(), {"client_cert": too_many, "client_key": client.key}
    )

    assert errors[("client_cert",)] == "At most 10 certificates; 12 given."


def test_a_chain_over_its_byte_limit_is_refused(client):
    padded = client.chain + "\n" * client_certificates.CHAIN_MAX_BYTES

    errors = refused(
        tls_set, http_endpoint(), {"client_cert": padded, "client_key": client.key}
    )

    assert errors[("client_cert",)] == "At most 64 KiB."


def test_a_key_pasted_into_the_chain_is_refused_not_stored_in_clear(client):
    value = {"client_cert": client.chain + client.key, "client_key": client.key}

    errors = refused(tls_set, http_endpoint(), value)

    assert "Only certificates" in errors[("client_cert",)]


def test_a_server_only_certificate_is_refused():
    server_only = client_certs.self_signed(usages=client_certs.SERVER_ONLY)

    errors = refused(
        tls_set,
        http_endpoint(),
        {"client_cert": server_only.chain, "client_key": server_only.key},
    )

    assert "clientAuth" in errors[("client_cert",)]


def test_a_certificate_without_extended_key_usage_is_accepted():
    plain = client_certs.self_signed(usages=None)
    endpoint = http_endpoint()

    tls_set(endpoint, {"client_cert": plain.chain, "client_key": plain.key})

    assert endpoint.tls_subject == "CN=self.example"


def test_the_leaf_must_come_first(client):
    leaf, intermediate = client.chain.split("-----END CERTIFICATE-----\n")[:2]
    backwards = (
        f"{intermediate}-----END CERTIFICATE-----\n{leaf}-----END CERTIFICATE-----\n"
    )

    errors = refused(
        tls_set, http_endpoint(), {"client_cert": backwards, "client_key": client.key}
    )

    assert "leaf" in errors[("client_cert",)]


@pytest.mark.parametrize(
    ("value", "loc"),
    [
        ({"client_cert": "x"}, ("client_key",)),
        ({"client_key": "x"}, ("client_cert",)),
        ({"pkcs12": "AAAA", "client_cert": "x"}, ("pkcs12",)),
        ({"pkcs12": "%%%"}, ("pkcs12",)),
        ({"ca_bundle": "nope"}, ("ca_bundle",)),
        ({"password": "x"}, ()),
        ({"nonsense": 1, "ca_bundle": "x"}, ("nonsense",)),
    ],
)
def test_incomplete_or_mixed_tls_is_refused(value, loc):
    assert loc in refused(tls_set, http_endpoint(), value)


def test_a_bundle_over_its_certificate_limit_is_refused(client):
    errors = refused(tls_set, http_endpoint(), {"ca_bundle": client.ca * 201})

    assert errors[("ca_bundle",)] == "At most 200 certificates; 201 given."


def test_no_tls_message_repeats_the_key(client):
    other = client_certs.identity("other.example")
    value = {"client_cert": client.chain + other.key, "client_key": other.key}

    with pytest.raises(CredentialsInvalid) as caught:
        tls_set(http_endpoint(), value)

    assert client_certs.key_body(other.key)[:40] not in str(caught.value)


def test_a_broker_endpoint_takes_neither(client):
    endpoint = Endpoint(kind="rabbitmq", url="amqp://broker.example/")

    assert () in refused(auth_set, endpoint, OAUTH2)
    assert () in refused(tls_set, endpoint, {"ca_bundle": client.ca})


def test_the_authorization_header_and_auth_are_refused_together():
    _, given_both = credentials_clean(
        endpoint=None,
        kind="http",
        headers={"authorization": "Bearer x"},
        auth={"type": "basic", "username": "u", "password": "p"},
    )
    stored = http_endpoint()
    auth_set(stored, {"type": "basic", "username": "u", "password": "p"})
    _, header_added = credentials_clean(
        endpoint=stored, kind="http", headers={"Authorization": "Bearer x"}
    )

    assert "Authorization" in given_both["auth"][0]
    assert "Authorization" in header_added["headers"][0]


def test_errors_are_keyed_as_the_api_nests_them():
    _, errors = credentials_clean(
        endpoint=None,
        kind="http",
        headers={},
        auth={**OAUTH2, "token_url": "nope"},
        tls={"client_key": "x"},
    )

    assert set(errors) == {"auth.token_url", "tls.client_cert", "tls.client_key"}
