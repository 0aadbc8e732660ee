"""Every portal and console page in Chromium at 1280, 390 and 360 px.

The pages come from the URLconf and the admin registry, so a new page is
walked without anyone listing it. Each is seeded to have content (a 220 KB
body included), its <details> opened, then checked: nothing sticks out
sideways outside a deliberate scroller, no control sits farther than 48 px
from its label, no word in a table cell is broken across lines. Screenshots
go to test-output/screenshots/walk-*.png.
"""

from __future__ import annotations

import re
import time

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import URLPattern, reverse

from endpoints.brokers import BROKER_KINDS
from relayproject.portal import urls as portal_urls
from tests.support.browser import SHOTS, chromium_page, shot
from tests.walk import seed
from tests.walk.checks import OPEN_DETAILS, offences

# About 300 page loads, each measured in place: more than the suite's 300 s
# on a machine shared with other work.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(900),
]

WIDTHS = (1280, 390, 360)
TIMES: list = []

# Portal routes that are not pages a person reads, and why.
NOT_PAGES = {
    "logout": "POST only",
    "link_open": "redeems a single-use link (tests/endpoints/test_portal_links*.py test it)",
    "address_confirm": "takes a mailed token (test_notification_addresses.py tests it)",
    "theme_css": "a stylesheet",
    "delivery_status": "JSON for the status poll",
    "delivery_body": "the body as a download",
    "login": "walked before signing in",
}
# Console routes that only take POST, or redirect.
ADMIN_SKIP = re.compile(r"_(delete|history|replay|autocomplete|password_change)$")


def portal_pages(walk: seed.Walk) -> dict[str, str]:
    values = {
        "slug": walk.slug,
        "endpoint_id": walk.endpoint_id,
        "delivery_id": walk.delivery_id,
    }
    pages = {}
    for pattern in portal_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        if pattern.name in NOT_PAGES:
            continue
        names = pattern.pattern.converters.keys()
        pages[pattern.name] = reverse(
            f"portal:{pattern.name}", kwargs={n: values[n] for n in names}
        )
    pages["delivery_detail_big"] = reverse(
        "portal:delivery_detail", args=[walk.slug, walk.big_delivery_id]
    )
    pages["delivery_list_dead"] = (
        reverse("portal:delivery_list", args=[walk.slug]) + "?status=dead"
    )
    return pages | broker_pages(walk)


def broker_pages(walk: seed.Walk) -> dict[str, str]:
    """The pages a broker endpoint changes: the form of each kind, the
    endpoint's own pages, and its deliveries (acknowledged and dead)."""
    slug, broker = walk.slug, walk.broker
    create = reverse("portal:endpoint_create", args=[slug])
    pages = {f"endpoint_create_{k}": f"{create}?kind={k}" for k in BROKER_KINDS}
    for name in (
        "endpoint_detail",
        "endpoint_edit",
        "endpoint_deliveries",
        "endpoint_health",
    ):
        pages[f"broker_{name}"] = reverse(
            f"portal:{name}", args=[slug, broker["endpoint_id"]]
        )
    for status in ("succeeded", "dead"):
        pages[f"broker_delivery_{status}"] = reverse(
            "portal:delivery_detail", args=[slug, broker[status]]
        )
    return pages


def admin_pages(walk: seed.Walk) -> dict[str, str]:
    request = RequestFactory().get("/admin/")
    request.user = walk.user
    pages = {"index": reverse("admin:index")}
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        pages[f"app-{opts.app_label}"] = reverse(
            "admin:app_list", args=[opts.app_label]
        )
        first = model._default_manager.order_by("pk").first()
        can_add = model_admin.has_add_permission(request)
        for pattern in model_admin.get_urls():
            name = getattr(pattern, "name", None)
            if not name or ADMIN_SKIP.search(name):
                continue
            if name.endswith("_add") and not can_add:
                continue
            params = pattern.pattern.converters.keys()
            values = {
                "object_id": first.pk if first else None,
                "endpoint_id": walk.endpoint_id,
            }
            if any(values.get(p) is None for p in params):
                continue
            pages[name] = reverse(
                f"admin:{name}", kwargs={p: values[p] for p in params}
            )
    pages["deliveries_delivery_big"] = reverse(
        "admin:deliveries_delivery_change", args=[walk.big_delivery_id]
    )
    return pages


def test_every_page_fits_at_every_width(live_server, settings):
    settings.RELAY_BROKER_HOSTS = seed.BROKER_HOSTS  # the form offers every kind
    walk = seed.relay()
    portal = portal_pages(walk)
    console = admin_pages(walk)
    assert {"endpoint_create", "catalogue", "notifications"} <= set(portal)
    assert {"deliveries_pipeline", "endpoints_endpoint_change"} <= set(console)
    found: dict[str, list[str]] = {}
    # A loaded machine (the suite runs beside other work) needs room per page.
    with chromium_page(width=WIDTHS[0], height=900, timeout_ms=60_000) as page:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.context.clear_cookies()
            page.goto(f"{live_server.url}{reverse('portal:login')}")
            check(page, f"portal-login-{width}", found)
            page.fill("#id_username", walk.user.username)
            page.fill("#id_password", seed.PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(lambda url: "/login/" not in url)
            for kind, pages in (("portal", portal), ("admin", console)):
                for name, path in pages.items():
                    status = visit(page, f"{live_server.url}{path}")
                    if status == 405 or (kind == "admin" and status == 403):
                        continue  # POST only, or a model nobody adds by hand
                    if status != 200:
                        found.setdefault(f"{kind}-{name}", []).append(f"HTTP {status}")
                        continue
                    if page.evaluate("document.contentType") != "text/html":
                        found.setdefault(f"{kind}-{name}", []).append(
                            "not an HTML page: list it in NOT_PAGES with why"
                        )
                        continue
                    check(page, f"{kind}-{name}-{width}", found)
    report = "\n".join(f"{page}: {o}" for page, items in found.items() for o in items)
    (SHOTS / "walk-faults.txt").write_text(report + "\n")
    (SHOTS / "walk-times.txt").write_text(
        "\n".join(f"{n} {a:.2f} {b:.2f}" for n, a, b in TIMES)
    )
    assert not found, f"{len(found)} pages with layout faults:\n{report}"


def visit(page, url: str) -> int:
    """Open a page when it is one; its HTTP status either way.

    The status is asked first (with the page's cookies): Chromium answers a
    bodiless 405 with an error page that navigates on its own, under the next
    page's checks.
    """
    status = page.request.get(url).status
    if status != 200:
        return status
    response = page.goto(url)
    page.wait_for_load_state("load")
    return response.status if response else 0


def check(page, name: str, found: dict[str, list[str]]) -> None:
    started = time.monotonic()
    page.wait_for_function("document.body !== null")
    page.evaluate(OPEN_DETAILS)
    problems = offences(page)
    checked = time.monotonic()
    shot(page, f"walk-{name}")
    TIMES.append((name, checked - started, time.monotonic() - checked))
    if problems:
        found[name] = problems
