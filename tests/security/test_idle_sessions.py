"""Admin and portal sessions end after SESSION_IDLE_SECONDS without a request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from endpoints import portal_links
from endpoints.models import Membership
from relayproject.clock import utcnow
from relayproject.sessions import IdleSessionMiddleware
from tests import factories
from tests.fakes import FakeClock

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
        merchant=factories.merchant("acme"), role="viewer", created_by="test"
    )
    client = Client()
    client.post(reverse("portal:link_open", args=[token]))
    assert client.get(PORTAL_PAGE).status_code == 200

    clock.advance(IDLE + 1)

    assert client.get(PORTAL_PAGE).status_code == 302
