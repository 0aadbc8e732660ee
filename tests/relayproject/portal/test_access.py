"""Generated from relayproject.portal.urls.urlpatterns: a new route cannot be forgotten."""

from __future__ import annotations

import logging
import re

import pytest
from django.test import Client
from django.urls import resolve, reverse

from deliveries.models import Delivery, Event
from deliveries.notifications.models import NotificationAddress, NotificationSettings
from endpoints.models import Endpoint, EndpointSecret
from relayproject.portal import urls as portal_urls

ROUTES = [p for p in portal_urls.urlpatterns]
# Open to anyone: signing in, opening a portal link, the theme stylesheet,
# confirming a notification address (test_notification_addresses.py).
PUBLIC = {"login", "link_open", "theme_css", "address_confirm"}
SIGNED_IN = [p for p in ROUTES if p.name not in PUBLIC]
MERCHANT_ROUTES = [p for p in ROUTES if "slug" in p.pattern.converters]
OBJECT_ROUTES = [p for p in MERCHANT_ROUTES if len(p.pattern.converters) > 1]
# Every merchant route is a portal_view (test_every_merchant_route_is_guarded),
# which says whether it is a write URL: one that takes a POST.
WRITE_ROUTES = [
    p for p in MERCHANT_ROUTES if getattr(p.callback, "portal_writes", False)
]
READ_ROUTES = [p for p in MERCHANT_ROUTES if p not in WRITE_ROUTES]
# Routes that change the session, not the merchant's data.
SESSION_ROUTES = {"login", "logout", "link_open"}
# Routes whose token comes from an email, not from a merchant's page.
TOKEN_ROUTES = {"address_confirm"}


def ids(route) -> str:
    return route.name


def url_for(route, side) -> str:
    return reverse(f"portal:{route.name}", kwargs=side.kwargs(route.pattern.converters))


def snapshot() -> tuple:
    """Everything a portal POST could change."""
    return (
        list(
            Endpoint.objects.order_by("pk").values_list(
                "pk",
                "url",
                "description",
                "event_types",
                "is_active",
                "max_attempts",
                "rate_limit_per_second",
                "max_in_flight",
            )
        ),
        list(EndpointSecret.objects.order_by("pk").values_list("pk", "expires_at")),
        list(NotificationSettings.objects.values_list()),
        list(NotificationAddress.objects.order_by("email").values_list()),
        Event.objects.count(),
        list(
            Delivery.objects.order_by("pk").values_list(
                "pk", "status", "budget_start", "next_attempt_at"
            )
        ),
    )


def test_the_route_list_is_not_empty():
    assert len(MERCHANT_ROUTES) >= 15


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", SIGNED_IN, ids=ids)
def test_anonymous_is_sent_to_sign_in(client, world, route, method):
    url = url_for(route, world.mine)
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("portal:login"))


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", MERCHANT_ROUTES, ids=ids)
def test_another_merchants_ids_are_404(client, world, route, method):
    client.force_login(world.owner)
    before = snapshot()
    response = getattr(client, method)(url_for(route, world.theirs))
    assert response.status_code == 404
    assert snapshot() == before


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", OBJECT_ROUTES, ids=ids)
def test_another_merchants_objects_under_my_merchant_are_404(
    client, world, route, method
):
    client.force_login(world.owner)
    kwargs = world.theirs.kwargs(route.pattern.converters)
    kwargs["slug"] = world.mine.merchant.slug
    before = snapshot()
    response = getattr(client, method)(reverse(f"portal:{route.name}", kwargs=kwargs))
    assert response.status_code == 404
    assert snapshot() == before


@pytest.mark.parametrize(
    "route",
    [r for r in ROUTES if r.name not in SESSION_ROUTES | TOKEN_ROUTES],
    ids=ids,
)
def test_a_viewer_cannot_change_anything(client, world, route):
    client.force_login(world.viewer)
    before = snapshot()
    response = client.post(
        url_for(route, world.mine),
        {
            "url": "http://127.0.0.1:9/changed",
            "since": "2000-01-01T00:00",
            "confirm": "True",
        },
    )
    assert response.status_code in (403, 405)
    assert snapshot() == before


def test_every_merchant_route_is_guarded():
    unguarded = [
        p.name for p in MERCHANT_ROUTES if not hasattr(p.callback, "portal_methods")
    ]
    assert unguarded == []
    # A route that takes a POST is a write URL, whatever else it takes.
    for route in MERCHANT_ROUTES:
        takes_post = "POST" in route.callback.portal_methods
        assert route.callback.portal_writes == takes_post, route.name
    assert len(WRITE_ROUTES) >= 12


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", WRITE_ROUTES, ids=ids)
def test_a_viewer_gets_the_branded_403_at_every_write_url(
    client, world, route, method, caplog
):
    client.force_login(world.viewer)
    before = snapshot()
    url = url_for(route, world.mine)
    with caplog.at_level(logging.INFO):
        response = getattr(client, method)(
            url,
            *(
                [{"url": "http://127.0.0.1:9/changed", "confirm": "True"}]
                if method == "post"
                else []
            ),
        )

    assert response.status_code == 403
    html = response.content.decode()
    assert 'id="forbidden"' in html and "You cannot change this" in html
    assert 'class="brand"' in html  # the portal's own page, with its header
    back = re.search(r'<a class="button" href="([^"]+)" id="forbidden-back"', html)
    assert back and client.get(back.group(1)).status_code == 200
    assert snapshot() == before
    assert "portal write refused" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]  # no traceback


@pytest.mark.parametrize("route", READ_ROUTES, ids=ids)
def test_a_viewer_can_read_every_read_page(client, world, route):
    client.force_login(world.viewer)
    response = client.get(url_for(route, world.mine))
    assert response.status_code == 200


@pytest.mark.parametrize("route", READ_ROUTES, ids=ids)
def test_a_viewer_is_shown_no_door_it_cannot_open(client, world, route):
    """No link or form on a viewer's page leads to a write URL."""
    client.force_login(world.viewer)
    html = client.get(url_for(route, world.mine)).content.decode()
    write_names = {f"portal:{p.name}" for p in WRITE_ROUTES}
    for target in re.findall(r'(?:href|action)="(/portal/[^"?#]*)', html):
        match = resolve(target)
        assert match.view_name not in write_names, (route.name, target)


@pytest.mark.parametrize("route", MERCHANT_ROUTES, ids=ids)
def test_every_post_needs_a_csrf_token(world, route):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.owner)
    before = snapshot()
    response = client.post(
        url_for(route, world.mine),
        {
            "url": "http://127.0.0.1:9/changed",
            "since": "2000-01-01T00:00",
            "confirm": "True",
        },
    )
    assert response.status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("route", MERCHANT_ROUTES, ids=ids)
def test_an_owner_can_open_every_page(client, world, route):
    client.force_login(world.owner)
    response = client.get(url_for(route, world.mine))
    assert response.status_code in (200, 405)
