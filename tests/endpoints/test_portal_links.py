"""One-time portal links: made over the API, opened once, for one merchant and role."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from endpoints import portal_links
from endpoints.models import Endpoint, PortalLink
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import api_as, assert_problem


def link_for(api, slug="acme", **body):
    response = api.post(f"/merchants/{slug}/portal-sessions", body or None)
    assert response.status_code == 201, response.content
    return response.json()


def open_link(url: str, client: Client | None = None):
    """Press the link page's button: its POST is what uses the link."""
    client = client or Client()
    return client, client.post(url.removeprefix("http://testserver"))


def test_a_link_opens_the_portal_for_its_merchant_once(platform, merchant, caplog):
    endpoint = factories.endpoint(merchant)
    with caplog.at_level(logging.INFO, logger="relayproject.portal"):
        link = link_for(platform)
        assert link["url"].startswith("http://testserver/portal/link/")
        client, response = open_link(link["url"])
    assert response.status_code == 302
    assert response["Location"] == reverse("portal:endpoint_list", args=["acme"])
    page = client.get(response["Location"])
    assert page.status_code == 200 and endpoint.url in page.content.decode()
    token = link["url"].rstrip("/").rsplit("/", 1)[1]
    assert token not in caplog.text and "portal link used" in caplog.text
    # Single use: a second browser, or the same one, gets a clear page.
    _, again = open_link(link["url"])
    assert again.status_code == 410
    assert "already been used" in again.content.decode()


def test_an_expired_link_is_a_clear_page(platform, merchant, settings):
    link = link_for(platform)
    PortalLink.objects.update(expires_at=utcnow() - timedelta(seconds=1))
    _, response = open_link(link["url"])
    assert response.status_code == 410
    assert "expired" in response.content.decode()


def test_an_unknown_link_is_a_clear_404(db):
    response = Client().post(reverse("portal:link_open", args=["nope"]))
    assert response.status_code == 404
    assert "not valid" in response.content.decode()


def test_the_link_expires_after_the_setting(platform, merchant, settings):
    settings.PORTAL_LINK_TTL_SECONDS = 120
    before = utcnow()
    link = link_for(platform)
    stored = PortalLink.objects.get()
    assert timedelta(seconds=119) < stored.expires_at - before < timedelta(seconds=121)
    assert link["expires_at"].startswith(f"{stored.expires_at:%Y-%m-%dT%H:%M}")


def test_a_link_session_sees_no_other_merchant(platform, merchant, other_merchant):
    theirs = factories.endpoint(other_merchant)
    client, _ = open_link(link_for(platform)["url"])
    for path in (
        reverse("portal:endpoint_list", args=["globex"]),
        reverse("portal:endpoint_detail", args=["globex", theirs.pk]),
        reverse("portal:endpoint_detail", args=["acme", theirs.pk]),
    ):
        assert client.get(path).status_code == 404
    assert (
        client.post(
            reverse("portal:endpoint_toggle", args=["globex", theirs.pk])
        ).status_code
        == 404
    )


def test_a_viewer_link_cannot_change_anything(platform, merchant):
    endpoint = factories.endpoint(merchant)
    client, _ = open_link(link_for(platform)["url"])
    toggle = reverse("portal:endpoint_toggle", args=["acme", endpoint.pk])
    assert client.post(toggle).status_code == 403
    assert Endpoint.objects.get().is_active


def test_a_developer_link_can_change_things(platform, merchant):
    endpoint = factories.endpoint(merchant)
    client, _ = open_link(link_for(platform, role="developer")["url"])
    client.post(reverse("portal:endpoint_toggle", args=["acme", endpoint.pk]))
    assert not Endpoint.objects.get().is_active


def test_a_scoped_key_makes_links_for_its_own_merchant_only(merchant, other_merchant):
    scoped = api_as(merchant)
    assert link_for(scoped)["url"]
    assert_problem(scoped.post("/merchants/globex/portal-sessions", {}), 404)


def test_an_unknown_role_is_422(platform, merchant):
    assert_problem(
        platform.post("/merchants/acme/portal-sessions", {"role": "admin"}),
        422,
        ["body", "role"],
    )


def test_a_link_session_ends_after_its_lifetime(platform, merchant, settings):
    settings.PORTAL_SESSION_SECONDS = 60
    client, _ = open_link(link_for(platform)["url"])
    listing = reverse("portal:endpoint_list", args=["acme"])
    assert client.get(listing).status_code == 200
    session = client.session
    data = session[portal_links.SESSION_KEY]
    data["expires_at"] = utcnow().timestamp() - 1
    session[portal_links.SESSION_KEY] = data
    session.save()
    response = client.get(listing)
    assert response.status_code == 302 and "/portal/login/" in response["Location"]


def test_signing_out_ends_a_link_session(platform, merchant):
    client, _ = open_link(link_for(platform)["url"])
    client.post(reverse("portal:logout"))
    assert client.get(reverse("portal:endpoint_list", args=["acme"])).status_code == 302


@pytest.mark.parametrize("listed", [True, False])
def test_framing_is_allowed_only_for_listed_origins(
    platform, merchant, settings, listed
):
    settings.PORTAL_FRAME_ANCESTORS = ["https://app.example.com"] if listed else []
    client, response = open_link(link_for(platform)["url"])
    page = client.get(response["Location"])
    if listed:
        assert "X-Frame-Options" not in page
        assert (
            "frame-ancestors https://app.example.com" in page["Content-Security-Policy"]
        )
    else:
        assert page["X-Frame-Options"] == "DENY"
    # Outside the portal nothing changes.
    assert Client().get("/admin/login/")["X-Frame-Options"] == "DENY"


def test_product_name_and_accent_colour_are_shown(platform, merchant, settings):
    settings.PORTAL_PRODUCT_NAME = "Acme Payments"
    settings.PORTAL_ACCENT_COLOR = "#aa3300"
    client, response = open_link(link_for(platform)["url"])
    html = client.get(response["Location"]).content.decode()
    assert 'class="brand"' in html and "Acme Payments" in html
    css = client.get(reverse("portal:theme_css")).content.decode()
    assert "--accent: #aa3300" in css


def test_opening_a_link_signed_in_as_a_user_drops_the_user_and_logs_no_token(
    platform, merchant, other_merchant, caplog
):
    from django.contrib.auth.models import User

    from endpoints.models import Membership

    user = User.objects.create_user("staffer", password="x" * 12)
    Membership.objects.create(user=user, merchant=other_merchant, role="owner")
    client = Client()
    client.force_login(user)
    link = link_for(platform)
    with caplog.at_level(logging.DEBUG):
        _, response = open_link(link["url"], client)
    token = link["url"].rstrip("/").rsplit("/", 1)[1]
    assert token not in caplog.text
    assert (
        client.get(reverse("portal:endpoint_list", args=["globex"])).status_code == 404
    )
    assert client.get(reverse("portal:endpoint_list", args=["acme"])).status_code == 200
