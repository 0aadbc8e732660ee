"""Admin and portal sessions end after SESSION_IDLE_SECONDS without a request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from endpoints import portal_links
from endpoints.models import Membership
from relayproject.lib.clock import frozen, utcnow
from relayproject.lib.sessions import IdleSessionMiddleware
from tests.support import factories
from tests.support.fakes import FakeClock

pytestmark = pytest.mark.django_db

IDLE = 1800


@pytest.fixture
def clock(monkeypatch, settings) -> FakeClock:
    settings.SESSION_IDLE_SECONDS = IDLE
    fake = FakeClock(start=utcnow())
    monkeypatch.setattr(IdleSessionMiddleware, "clock", fake)
    return fake


@pytest.fixture
def owner_client() -> Client:
    acme = factories.merchant("acme")
    user = User.objects.create_user("owner", password="x" * 16)
    Membership.objects.create(user=user, merchant=acme, role="owner")
    client = Client()
    client.force_login(user)
    return client


PORTAL_PAGE = "/portal/m/acme/"


def test_an_idle_portal_session_is_signed_out(clock, owner_client):
    assert owner_client.get(PORTAL_PAGE).status_code == 200

    clock.advance(IDLE + 1)
    response = owner_client.get(PORTAL_PAGE)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("portal:login"))
    login = owner_client.get(response["Location"]).content.decode()
    assert "You were signed out after 30 minutes without activity" in login
    # Signed out for good, not just for that request.
    clock.advance(1)
    assert owner_client.get(PORTAL_PAGE).status_code == 302


def test_an_idle_admin_session_is_signed_out(clock):
    staff = User.objects.create_superuser("root", password="x" * 16)
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/").status_code == 200

    clock.advance(IDLE + 1)
    response = client.get("/admin/")

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    login = client.get(response["Location"]).content.decode()
    assert "You were signed out after 30 minutes without activity" in login


def test_activity_keeps_a_session_alive_past_the_limit(clock, owner_client):
    for _ in range(4):  # 4 x 0.9 x the limit in all, never idle that long
        assert owner_client.get(PORTAL_PAGE).status_code == 200
        clock.advance(IDLE * 0.9)
    assert owner_client.get(PORTAL_PAGE).status_code == 200


def test_a_portal_link_session_idles_out_too(clock, settings):
    settings.PORTAL_SESSION_SECONDS = 10 * IDLE
    _, token = portal_links.portal_link_create(
        merchant=factories.merchant("acme"),
        role="viewer",
        created_by="test",
        now=utcnow(),
    )
    client = Client()
    client.post(reverse("portal:link_open", args=[token]))
    assert client.get(PORTAL_PAGE).status_code == 200

    clock.advance(IDLE + 1)

    assert client.get(PORTAL_PAGE).status_code == 302


# With the project clock: the middleware reads utcnow() through SystemClock.
LIMIT = 60


@pytest.fixture
def at(settings):
    settings.SESSION_IDLE_SECONDS = LIMIT
    start = utcnow()
    return lambda seconds: frozen(start + timedelta(seconds=seconds))


def test_a_session_never_used_after_sign_in_idles_out(at):
    """The mark is set at sign-in: before, the first request after it set the
    mark, so a session left idle from sign-in was never signed out."""
    acme = factories.merchant("acme")
    user = User.objects.create_user("owner", password="x" * 16)
    Membership.objects.create(user=user, merchant=acme, role="owner")
    client = Client()
    with at(0):
        client.force_login(user)
    with at(LIMIT + 1):
        response = client.get(PORTAL_PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("portal:login"))


def test_a_portal_link_session_never_used_after_it_opens_idles_out(at, settings):
    settings.PORTAL_SESSION_SECONDS = 10 * LIMIT
    _, token = portal_links.portal_link_create(
        merchant=factories.merchant("acme"),
        role="viewer",
        created_by="test",
        now=utcnow(),
    )
    client = Client()
    with at(0):
        client.post(reverse("portal:link_open", args=[token]))
    with at(LIMIT + 1):
        assert client.get(PORTAL_PAGE).status_code == 302


@pytest.mark.parametrize("every", [15, 15.5, 25, 45])
def test_polling_under_the_limit_never_signs_out(at, owner_client, every):
    """At a 60 s limit the mark used to move only once 60 s had passed since
    it, so a poll every 25 s found it 75 s old and signed the user out."""
    for n in range(12):
        with at(n * every):
            response = owner_client.get(PORTAL_PAGE)
        assert response.status_code == 200, f"poll {n} at {n * every} s"
