"""The portal's Authentication page: an owner sets Basic or OAuth2 auth and a
client certificate (PEM or PKCS#12) with a CA bundle; secrets are write-only
and never reach a page; errors sit next to their fields and nothing is half
saved; developers read, viewers do not reach it, broker endpoints have none."""

from __future__ import annotations

import base64
import datetime as dt
import logging
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.urls import reverse

from endpoints.client_credentials import credentials_clean
from endpoints.models import Endpoint, Membership
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from relayproject.portal.views.credentials import _write
from tests.relayproject.portal.test_forms import field_block
from tests.support import client_certs, factories
from tests.support.portal import user_with_role

TOKEN_URL = "http://127.0.0.1:9/oauth/token"
HOOK = "https://127.0.0.1:9/hook"
CLIENT_SECRET = "client-secret-never-shown-4c1d"
PASSWORD = "basic-password-never-shown-77e0"
P12_PASSWORD = "p12-password-never-shown-0a9b"
OAUTH2 = {
    "auth_type": "oauth2",
    "token_url": TOKEN_URL,
    "client_id": "relay-client",
    "client_secret": CLIENT_SECRET,
    "scope": "hooks.write",
}


@pytest.fixture(scope="module")
def identity():
    return client_certs.identity("client.acme.example")


def page_url(endpoint) -> str:
    return reverse(
        "portal:endpoint_credentials", args=[endpoint.merchant.slug, endpoint.pk]
    )


def detail_url(endpoint) -> str:
    return reverse("portal:endpoint_detail", args=[endpoint.merchant.slug, endpoint.pk])


def fresh(endpoint) -> Endpoint:
    return Endpoint.objects.get(pk=endpoint.pk)


def raw_columns(endpoint) -> str:
    """Every credentials column as PostgreSQL holds it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT auth_secret, tls_client_key FROM endpoints_endpoint WHERE id = %s",
            [endpoint.pk],
        )
        return repr(cursor.fetchone())


def assert_nothing_secret(html: str, identity) -> None:
    for secret in (CLIENT_SECRET, PASSWORD, P12_PASSWORD):
        assert secret not in html
    assert client_certs.key_body(identity.key)[:60] not in html


@pytest.fixture(autouse=True)
def _https(world):
    # A client certificate is used only over https (and auth, but for
    # RELAY_ALLOW_PRIVATE_DESTINATIONS, which tests set).
    endpoint_update(endpoint=world.mine.endpoint, url=HOOK, now=utcnow())


@pytest.fixture
def owner(client, world):
    client.force_login(world.owner)
    return client


def test_an_owner_sets_oauth2_and_a_pem_certificate(owner, world, identity):
    endpoint = world.mine.endpoint

    response = owner.post(
        page_url(endpoint),
        {
            **OAUTH2,
            "client_cert": identity.chain,
            "client_key": identity.key,
            "ca_bundle": identity.ca,
        },
    )

    assert response.status_code == 302, response.content.decode()[-3000:]
    stored = fresh(endpoint)
    assert stored.auth_type == "oauth2"
    assert stored.auth_settings["token_url"] == TOKEN_URL
    assert stored.auth_secret == CLIENT_SECRET
    assert stored.tls_subject.startswith("CN=client.acme.example")
    assert stored.tls_ca_bundle and stored.credentials_version
    # Encrypted at rest: the columns never hold the secrets in clear.
    columns = raw_columns(endpoint)
    assert CLIENT_SECRET not in columns
    assert client_certs.key_body(identity.key)[:60] not in columns
    html = owner.get(page_url(endpoint)).content.decode()
    assert "client.acme.example" in html and "relay-client" in html
    assert_nothing_secret(html, identity)


def test_an_owner_sets_basic_auth_and_the_page_never_shows_the_password(
    owner, world, identity
):
    endpoint = world.mine.endpoint

    owner.post(
        page_url(endpoint),
        {"auth_type": "basic", "username": "acme", "password": PASSWORD},
    )

    assert (fresh(endpoint).auth_type, fresh(endpoint).auth_secret) == (
        "basic",
        PASSWORD,
    )
    for url in (page_url(endpoint), detail_url(endpoint)):
        html = owner.get(url).content.decode()
        assert "HTTP Basic as <code" in html
        assert_nothing_secret(html, identity)


def test_an_empty_password_keeps_the_stored_one(owner, world):
    endpoint = world.mine.endpoint
    owner.post(
        page_url(endpoint),
        {"auth_type": "basic", "username": "acme", "password": PASSWORD},
    )

    form = owner.get(page_url(endpoint)).content.decode()
    response = owner.post(
        page_url(endpoint), {"auth_type": "basic", "username": "acme-2", "password": ""}
    )

    assert "A password is set; leave empty to keep it." in field_block(form, "password")
    assert response.status_code == 302
    stored = fresh(endpoint)
    assert (stored.auth_settings["username"], stored.auth_secret) == (
        "acme-2",
        PASSWORD,
    )


def test_errors_sit_next_to_their_fields_and_nothing_is_saved(owner, world, identity):
    endpoint = world.mine.endpoint
    other = client_certs.identity("other.example")

    response = owner.post(
        page_url(endpoint),
        {
            **OAUTH2,
            "token_url": "ftp://127.0.0.1/token",
            "client_id": "",
            "client_cert": identity.chain,
            "client_key": other.key,  # not the certificate's key
        },
    )

    html = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was saved: 3 fields below need a change." in html
    assert "only http and https URLs may be called" in field_block(html, "token_url")
    assert "Required" in field_block(html, "client_id")
    assert "does not match the certificate" in field_block(html, "client_key")
    # What was typed in a secret field is not sent back.
    assert "Not saved: give it again." in field_block(html, "client_secret")
    assert_nothing_secret(html, identity)
    assert client_certs.key_body(other.key)[:60] not in html
    stored = fresh(endpoint)
    assert (stored.auth_type, stored.tls_client_cert, stored.credentials_version) == (
        "",
        "",
        "",
    )


def test_a_valid_auth_is_not_saved_beside_a_refused_certificate(owner, world):
    endpoint = world.mine.endpoint

    response = owner.post(
        page_url(endpoint), {**OAUTH2, "client_cert": "not a certificate"}
    )

    assert response.status_code == 400
    assert "PEM" in field_block(response.content.decode(), "client_key")
    assert fresh(endpoint).auth_type == ""


def test_a_pkcs12_file_with_its_password_is_taken(owner, world, identity):
    endpoint = world.mine.endpoint
    data = base64.b64decode(identity.pkcs12(P12_PASSWORD))

    response = owner.post(
        page_url(endpoint),
        {
            "auth_type": "",
            "pkcs12": SimpleUploadedFile("client.p12", data),
            "pkcs12_password": P12_PASSWORD,
        },
    )

    assert response.status_code == 302, response.content.decode()[-3000:]
    assert fresh(endpoint).tls_subject.startswith("CN=client.acme.example")


def test_a_wrong_pkcs12_password_is_said_next_to_the_file(owner, world, identity):
    endpoint = world.mine.endpoint
    data = base64.b64decode(identity.pkcs12(P12_PASSWORD))

    response = owner.post(
        page_url(endpoint),
        {
            "pkcs12": SimpleUploadedFile("client.p12", data),
            "pkcs12_password": "wrong-password-3f2",
        },
    )

    html = response.content.decode()
    assert "the password is wrong" in field_block(html, "pkcs12")
    assert "wrong-password-3f2" not in html
    assert fresh(endpoint).tls_client_cert == ""


def test_a_new_ca_bundle_keeps_the_stored_certificate_and_its_warning(
    owner, world, identity
):
    endpoint = world.mine.endpoint
    owner.post(
        page_url(endpoint), {"client_cert": identity.chain, "client_key": identity.key}
    )
    warned = utcnow()
    Endpoint.objects.filter(pk=endpoint.pk).update(tls_expiry_warned_for=warned)
    before = fresh(endpoint)

    response = owner.post(page_url(endpoint), {"ca_bundle": identity.ca})

    assert response.status_code == 302, response.content.decode()[-3000:]
    after = fresh(endpoint)
    assert after.tls_client_cert == before.tls_client_cert
    assert after.tls_client_key == before.tls_client_key
    assert after.tls_ca_bundle and after.tls_expiry_warned_for == warned


def test_a_new_certificate_keeps_the_bundle_unless_it_is_removed(
    owner, world, identity
):
    endpoint = world.mine.endpoint
    other = client_certs.identity("next.acme.example")
    owner.post(
        page_url(endpoint),
        {
            "client_cert": identity.chain,
            "client_key": identity.key,
            "ca_bundle": identity.ca,
        },
    )

    owner.post(
        page_url(endpoint), {"client_cert": other.chain, "client_key": other.key}
    )
    kept = fresh(endpoint)
    owner.post(page_url(endpoint), {"remove_ca_bundle": "on"})

    assert kept.tls_subject.startswith("CN=next.acme.example") and kept.tls_ca_bundle
    assert fresh(endpoint).tls_ca_bundle == ""
    assert fresh(endpoint).tls_subject.startswith("CN=next.acme.example")


@pytest.mark.parametrize(
    ("part", "cleared"),
    [("auth", ("auth_type", "")), ("tls", ("tls_client_cert", ""))],
)
def test_the_remove_buttons_remove_their_part_only(
    owner, world, identity, part, cleared
):
    endpoint = world.mine.endpoint
    owner.post(
        page_url(endpoint),
        {**OAUTH2, "client_cert": identity.chain, "client_key": identity.key},
    )
    html = owner.get(page_url(endpoint)).content.decode()
    assert f'id="remove-{part}"' in html

    response = owner.post(page_url(endpoint), {"remove": part})

    assert response.status_code == 302
    stored = fresh(endpoint)
    name, value = cleared
    assert getattr(stored, name) == value
    other = "tls_client_cert" if part == "auth" else "auth_type"
    assert getattr(stored, other)  # the other part stays


def test_a_custom_authorization_header_is_refused_beside_auth(owner, world):
    endpoint = world.mine.endpoint
    endpoint_update(endpoint=endpoint, headers={"Authorization": "x"}, now=utcnow())

    response = owner.post(page_url(endpoint), OAUTH2)

    picker = re.search(
        r'data-field="auth_type">(.*?)</fieldset>', response.content.decode(), re.S
    )
    assert "cannot be set with auth" in picker.group(1)
    assert fresh(endpoint).auth_type == ""


def test_a_change_is_logged_without_a_secret(owner, world, caplog):
    with caplog.at_level(logging.INFO, logger="relayproject.portal"):
        owner.post(page_url(world.mine.endpoint), OAUTH2)

    assert (
        f"endpoint credentials changed by=user {world.owner.pk} "
        f"endpoint_id={world.mine.endpoint.pk} auth=oauth2 tls=kept"
    ) in caplog.text
    assert CLIENT_SECRET not in caplog.text


def test_a_stale_page_does_not_overwrite_a_newer_change(world):
    """Two owners: the second saves from a page read before the first saved."""
    endpoint = world.mine.endpoint
    stale = fresh(endpoint)
    first, _ = credentials_clean(
        endpoint=endpoint, kind="http", headers={}, auth={**_auth(), "client_id": "a"}
    )
    assert _write(fresh(endpoint), first)

    second, _ = credentials_clean(
        endpoint=stale, kind="http", headers={}, auth={**_auth(), "client_id": "b"}
    )

    assert not _write(stale, second)
    assert fresh(endpoint).auth_settings["client_id"] == "a"


def _auth() -> dict:
    return {
        "type": "oauth2",
        "token_url": TOKEN_URL,
        "client_id": "x",
        "client_secret": CLIENT_SECRET,
    }


@pytest.mark.parametrize(("days", "badge"), [(5, "expires in 4 days"), (-2, "expired")])
def test_an_expiring_certificate_is_flagged(owner, world, days, badge):
    endpoint = world.mine.endpoint
    soon = utcnow() + dt.timedelta(days=days, hours=-1)
    made = client_certs.identity("soon.example", not_after=soon)
    owner.post(page_url(endpoint), {"client_cert": made.chain, "client_key": made.key})

    for url in (page_url(endpoint), detail_url(endpoint)):
        html = owner.get(url).content.decode()
        assert re.search(rf'id="cert-badge">{badge}</span>', html), html[-4000:]


def test_a_developer_reads_the_page_but_cannot_change_it(client, world, identity):
    developer = user_with_role(world.mine.merchant, Membership.Role.DEVELOPER, "dev")
    client.force_login(developer)
    endpoint = world.mine.endpoint

    html = client.get(page_url(endpoint)).content.decode()
    response = client.post(page_url(endpoint), OAUTH2)
    removal = client.post(page_url(endpoint), {"remove": "auth"})

    assert 'id="owners-only"' in html and "<form" not in html.split("</nav>")[-1]
    assert response.status_code == removal.status_code == 403
    assert "this change is for its owners only" in response.content.decode()
    assert fresh(endpoint).auth_type == ""


def test_a_viewer_sees_the_state_on_the_endpoint_page_only(client, world, identity):
    endpoint = world.mine.endpoint
    client.force_login(world.owner)
    client.post(
        page_url(endpoint), {"client_cert": identity.chain, "client_key": identity.key}
    )
    client.force_login(world.viewer)

    detail = client.get(detail_url(endpoint)).content.decode()

    assert "client.acme.example" in detail
    assert page_url(endpoint) not in detail
    assert client.get(page_url(endpoint)).status_code == 403


def test_every_post_needs_the_csrf_token(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.owner)

    response = client.post(page_url(world.mine.endpoint), OAUTH2)

    assert response.status_code == 403
    assert fresh(world.mine.endpoint).auth_type == ""


def test_a_broker_endpoint_has_no_authentication_page(owner, world, settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq"]
    broker = factories.endpoint(
        world.mine.merchant,
        kind="rabbitmq",
        url="amqp://127.0.0.1:5672/",
        target={"exchange": "", "routing_key": "orders"},
    )

    detail = owner.get(detail_url(broker)).content.decode()

    assert owner.get(page_url(broker)).status_code == 404
    assert owner.post(page_url(broker), OAUTH2).status_code == 404
    assert page_url(broker) not in detail and 'id="auth-state"' not in detail


def edit_url(endpoint) -> str:
    return reverse("portal:endpoint_edit", args=[endpoint.merchant.slug, endpoint.pk])


@pytest.mark.parametrize(
    ("role", "moved"),
    [(Membership.Role.DEVELOPER, False), (Membership.Role.OWNER, True)],
)
def test_only_an_owner_moves_an_endpoint_that_sends_credentials(
    client, world, role, moved
):
    # A developer may edit endpoints but not their credentials: pointing one
    # that sends a password at a server of their own would read it.
    endpoint = world.mine.endpoint
    endpoint_update(
        endpoint=endpoint,
        auth={"type": "basic", "username": "relay", "password": PASSWORD},
        now=utcnow(),
    )
    before = fresh(endpoint).url
    client.force_login(user_with_role(world.mine.merchant, role, "editor"))

    response = client.post(
        edit_url(endpoint),
        {
            "url": "http://127.0.0.1:9/collector",
            "description": "",
            "event_types": "",
        },
    )

    after = fresh(endpoint).url
    if moved:
        assert response.status_code == 302
        assert after == "http://127.0.0.1:9/collector"
    else:
        assert response.status_code == 400
        assert "Only an owner can change the URL" in field_block(
            response.content.decode(), "url"
        )
        assert after == before


def test_a_developer_still_edits_the_rest_of_such_an_endpoint(client, world):
    endpoint = world.mine.endpoint
    endpoint_update(
        endpoint=endpoint,
        auth={"type": "basic", "username": "relay", "password": PASSWORD},
        now=utcnow(),
    )
    client.force_login(
        user_with_role(world.mine.merchant, Membership.Role.DEVELOPER, "editor")
    )

    response = client.post(
        edit_url(endpoint),
        {"url": endpoint.url, "description": "billing", "event_types": ""},
    )

    assert response.status_code == 302
    assert fresh(endpoint).description == "billing"
