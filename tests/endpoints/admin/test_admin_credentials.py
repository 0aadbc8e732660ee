"""The staff console's endpoint page: auth and client certificate shown
without secrets, set and removed through write-only fields, errors beside
their field, and no password, secret or key ever in the page."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from endpoints.client_credentials import auth_set, tls_set
from endpoints.models import Endpoint
from tests.support import client_certs, factories

pytestmark = pytest.mark.django_db

PASSWORD = "Admin-Pass-Tapir-5521"
CLIENT_SECRET = "Admin-Secret-Ibis-8830"
HOOK = "https://127.0.0.1:9/hook"  # a client certificate is used only over https


@pytest.fixture(scope="module")
def client_identity():
    return client_certs.identity("admin-client.example")


def page_of(endpoint: Endpoint) -> str:
    return reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])


def upload(name: str, text: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode() if isinstance(text, str) else text)


def post(admin_client, endpoint: Endpoint, **fields):
    """The change form as a browser posts it: unchanged auth fields carry
    their shown values, blank secrets and no files unless given."""
    stored = endpoint.auth_settings or {}
    data = {
        "set_auth_type": endpoint.auth_type,
        **{f"set_{p}": stored.get(p, "") for p in ("username", "token_url")},
        **{f"set_{p}": stored.get(p, "") for p in ("client_id", "scope", "audience")},
        "set_password": "",
        "set_client_secret": "",
        "pkcs12_password": "",
        "_save": "Save",
        "secrets-TOTAL_FORMS": "0",
        "secrets-INITIAL_FORMS": str(endpoint.secrets.count()),
        "secrets-MIN_NUM_FORMS": "0",
        "secrets-MAX_NUM_FORMS": "0",
    }
    data |= fields
    return admin_client.post(page_of(endpoint), data)


def field_errors(response) -> dict[str, list[str]]:
    form = response.context["adminform"].form
    return {name: list(errors) for name, errors in form.errors.items()}


def with_auth_and_certificate(identity) -> Endpoint:
    endpoint = factories.endpoint(url=HOOK)
    auth_set(endpoint, {"type": "basic", "username": "relay", "password": PASSWORD})
    tls_set(
        endpoint,
        {
            "client_cert": identity.chain,
            "client_key": identity.key,
            "ca_bundle": identity.ca,
        },
    )
    endpoint.save()
    return endpoint


def test_the_page_shows_auth_and_certificate_never_their_secrets(
    admin_client, client_identity
):
    endpoint = with_auth_and_certificate(client_identity)

    html = admin_client.get(page_of(endpoint)).content.decode()

    assert "HTTP Basic as relay (password set, write-only)" in html
    assert "CN=admin-client.example" in html
    assert "valid; the receiver is checked against its own CA bundle" in html
    assert PASSWORD not in html
    assert client_certs.key_body(client_identity.key)[:40] not in html


def test_an_expired_certificate_is_shown_expired(admin_client):
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    expired = client_certs.identity(
        not_before=past - dt.timedelta(days=9), not_after=past
    )
    endpoint = factories.endpoint(url=HOOK)
    tls_set(endpoint, {"client_cert": expired.chain, "client_key": expired.key})
    endpoint.save()

    html = admin_client.get(page_of(endpoint)).content.decode()

    assert "EXPIRED" in html


def test_staff_set_oauth2_and_the_secret_is_stored_not_shown(admin_client):
    endpoint = factories.endpoint(url=HOOK)

    response = post(
        admin_client,
        endpoint,
        set_auth_type="oauth2",
        set_token_url="https://127.0.0.1:8443/token",
        set_client_id="relay",
        set_client_secret=CLIENT_SECRET,
        set_scope="hooks.write",
    )

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert (endpoint.auth_type, endpoint.auth_secret) == ("oauth2", CLIENT_SECRET)
    assert endpoint.credentials_version
    assert CLIENT_SECRET not in admin_client.get(page_of(endpoint)).content.decode()


def test_staff_upload_a_certificate_and_key(admin_client, client_identity):
    endpoint = factories.endpoint(url=HOOK)

    response = post(
        admin_client,
        endpoint,
        upload_client_cert=upload("chain.pem", client_identity.chain),
        upload_client_key=upload("key.pem", client_identity.key),
    )

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert endpoint.tls_subject.startswith("CN=admin-client.example")


def test_staff_upload_pkcs12_with_its_password(admin_client, client_identity):
    endpoint = factories.endpoint(url=HOOK)
    p12 = base64.b64decode(client_identity.pkcs12("p12-admin"))

    response = post(
        admin_client,
        endpoint,
        upload_pkcs12=upload("id.p12", p12),
        pkcs12_password="p12-admin",
    )

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert endpoint.tls_client_key.startswith("-----BEGIN PRIVATE KEY-----")


def test_a_new_ca_bundle_keeps_the_certificate(admin_client, client_identity):
    endpoint = with_auth_and_certificate(client_identity)
    other = client_certs.identity("other.example")
    before = (endpoint.tls_client_cert, endpoint.tls_client_key)

    response = post(admin_client, endpoint, upload_ca_bundle=upload("ca.pem", other.ca))

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert (endpoint.tls_client_cert, endpoint.tls_client_key) == before
    assert endpoint.tls_ca_bundle == other.ca


def test_staff_remove_auth_and_certificate(admin_client, client_identity):
    endpoint = with_auth_and_certificate(client_identity)

    response = post(
        admin_client,
        endpoint,
        set_auth_type="",
        remove_client_cert="on",
        remove_ca_bundle="on",
    )

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert (endpoint.auth_type, endpoint.auth_secret) == ("", None)
    assert (endpoint.tls_client_cert, endpoint.tls_client_key) == ("", None)
    assert endpoint.credentials_version == ""


def test_errors_sit_beside_their_fields_and_nothing_changes(
    admin_client, client_identity
):
    endpoint = with_auth_and_certificate(client_identity)
    other = client_certs.identity("other.example")
    version = endpoint.credentials_version

    response = post(
        admin_client,
        endpoint,
        set_auth_type="oauth2",
        set_token_url="ftp://nowhere",
        set_client_id="relay",
        set_client_secret=CLIENT_SECRET,
        upload_client_cert=upload("chain.pem", client_identity.chain),
        upload_client_key=upload("key.pem", other.key),
    )

    errors = field_errors(response)
    assert response.status_code == 200
    assert set(errors) == {"set_token_url", "upload_client_key"}
    html = response.content.decode()
    assert CLIENT_SECRET not in html
    assert client_certs.key_body(other.key)[:40] not in html
    endpoint.refresh_from_db()
    assert (endpoint.auth_type, endpoint.credentials_version) == ("basic", version)


def test_a_blank_password_keeps_the_stored_one(admin_client, client_identity):
    endpoint = with_auth_and_certificate(client_identity)

    response = post(admin_client, endpoint, set_username="relay2")

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert endpoint.auth_settings == {"username": "relay2"}
    assert endpoint.auth_secret == PASSWORD


def test_saving_unchanged_writes_nothing(admin_client, client_identity):
    endpoint = with_auth_and_certificate(client_identity)
    version = endpoint.credentials_version

    response = post(admin_client, endpoint)

    assert response.status_code == 302, field_errors(response)
    endpoint.refresh_from_db()
    assert endpoint.credentials_version == version


def test_a_broker_endpoint_page_has_no_credential_fields(admin_client, settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq"]
    endpoint = factories.endpoint(
        url="amqp://127.0.0.1:5672/orders",
        kind="rabbitmq",
        target={"exchange": "", "routing_key": "orders"},
    )

    html = admin_client.get(page_of(endpoint)).content.decode()

    assert 'name="set_auth_type"' not in html
    assert 'name="upload_client_key"' not in html
