"""Each attempt records what it sent and what came back; the delivery pages
show that record, never a rebuild from the endpoint as it is now."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from deliveries.dispatch import outgoing
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import Membership
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.fakes import Reply
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "Bearer tok-9f8e7d6c5b4a"


@pytest.fixture
def sent(receiver):
    """One delivery sent to a real receiver with a custom header, then the
    endpoint moved to another URL."""
    receiver.respond = lambda _r: Reply(
        status=500, body=b"down", headers={"X-Receiver-Build": "b-4711"}
    )
    endpoint = factories.endpoint(url=receiver.url, headers={"Authorization": TOKEN})
    event_publish(merchant=endpoint.merchant, type="a", data={"n": 1})
    call_command("run_dispatcher", "--once")
    got = receiver.wait_for(1)[0]
    old_url = endpoint.url
    endpoint_update(endpoint=endpoint, url="http://127.0.0.1:9/elsewhere", now=utcnow())
    return endpoint, old_url, got


def test_the_attempt_stores_url_and_headers_with_secrets_as_fingerprints(sent):
    endpoint, old_url, got = sent
    attempt = Attempt.objects.get()
    assert attempt.request_url == old_url
    headers = dict(attempt.request_headers)
    assert headers["X-Relay-Attempt"] == "1"
    assert headers["webhook-id"] == got.headers["webhook-id"]
    assert headers["Authorization"].startswith("redacted, hmac ")
    assert headers["webhook-signature"].startswith("redacted, hmac ")
    assert TOKEN not in str(attempt.request_headers)
    assert got.headers["webhook-signature"] not in str(attempt.request_headers)
    assert ["X-Receiver-Build", "b-4711"] in attempt.response_headers


def test_the_fingerprint_is_keyed_so_viewers_cannot_test_guesses(sent, settings):
    """A plain sha256(value)[:8] shown to every viewer is an offline oracle
    for guessing the token; an HMAC keyed from SECRET_KEY is not."""
    attempt = Attempt.objects.get()
    shown = dict(attempt.request_headers)["Authorization"]
    plain = hashlib.sha256(TOKEN.encode()).hexdigest()[:8]
    assert shown.startswith("redacted, hmac ")
    assert plain not in shown
    # Equal values show equal fingerprints; another server key, another one.
    assert outgoing.fingerprint(TOKEN) == shown
    assert outgoing.fingerprint(TOKEN + "x") != shown
    settings.SECRET_KEY = "another-relay-secret-key-for-this-test"
    assert outgoing.fingerprint(TOKEN) != shown


def test_the_delivery_pages_show_the_old_url_and_no_secret(sent, client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    endpoint, old_url, got = sent
    delivery = Delivery.objects.get()
    slug = endpoint.merchant.slug
    client.force_login(user_with_role(endpoint.merchant, Membership.Role.OWNER, "o"))
    portal = client.get(
        reverse("portal:delivery_detail", args=[slug, delivery.pk])
    ).content.decode()
    assert f"POST {old_url}</pre>" in portal
    assert "POST http://127.0.0.1:9/elsewhere" not in portal
    assert "X-Receiver-Build" in portal and "b-4711" in portal
    pages = [
        portal,
        client.get(
            reverse("portal:endpoint_detail", args=[slug, endpoint.pk])
        ).content.decode(),
    ]
    client.force_login(User.objects.create_superuser("staff", password="x"))
    admin = client.get(
        reverse("admin:deliveries_delivery_change", args=[delivery.pk])
    ).content.decode()
    assert f"POST {old_url}</summary>" in admin
    assert "b-4711" in admin
    pages.append(admin)
    signature = got.headers["webhook-signature"]
    for html in pages:
        assert TOKEN not in html
        assert "tok-9f8e7d6c5b4a" not in html
        for sig in signature.split(" "):
            assert sig.partition(",")[2] not in html


def test_the_body_downloads_as_the_exact_bytes_sent(sent, client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    endpoint, _old_url, got = sent
    delivery = Delivery.objects.get()
    client.force_login(user_with_role(endpoint.merchant, Membership.Role.VIEWER, "v"))
    response = client.get(
        reverse("portal:delivery_body", args=[endpoint.merchant.slug, delivery.pk])
    )
    assert response.content == got.body
    assert response["Content-Disposition"] == (
        f'attachment; filename="{delivery.pk}.json"'
    )
