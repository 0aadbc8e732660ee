"""A platform's customer in Debian's Chromium: from an API-made link to every page
(and the states its forms lead to), at 1280 and 390 px wide with nothing past the
right edge, plus the portal in an iframe."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

from endpoints.models import Endpoint, Merchant
from endpoints.services import endpoint_disable
from tests.support import factories
from tests.support.api import api_as
from tests.support.browser import chromium_page, shot
from tests.support.portal import dead_delivery

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_URL = "http://127.0.0.1:9/webhooks/" + "very-long-path-segment-" * 8 + "end"
SCHEMA = {
    "type": "object",
    "required": ["order_id"],
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
}


def portal_link(live_server, slug="acme", role="owner") -> str:
    api = api_as(None)
    response = api.post(f"/merchants/{slug}/portal-sessions", {"role": role})
    assert response.status_code == 201, response.content
    return response.json()["url"].replace("http://testserver", live_server.url)


@pytest.fixture
def world():
    api = api_as(None)
    api.post("/merchants", {"slug": "acme", "name": "Acme Shop"})
    api.post("/merchants", {"slug": "globex", "name": "Globex"})
    api.post(
        "/event-types",
        {
            "name": "order.created",
            "description": "An order was placed.",
            "schema": SCHEMA,
            "example": {"order_id": "o-1", "amount": 120},
        },
    )
    created = api.post(
        "/merchants/acme/endpoints",
        {
            "url": LONG_URL,
            "description": "Orders service",
            "event_types": ["order.*"],
            "filter": {"data": {"amount": {"$gte": 100}}},
            "headers": {"Authorization": "Bearer hidden-value"},
        },
    ).json()
    endpoint = Endpoint.objects.get(pk=created["id"])
    for _ in range(3):
        dead_delivery(endpoint, type="order.refunded")
    globex = factories.endpoint(Merchant.objects.get(slug="globex"))
    return {"endpoint": endpoint, "globex": globex}


# Anything laid out past the right edge of the screen, outside the boxes that
# scroll on purpose (code, inputs, wide tables in .scroll): a tab or a button
# hidden in a sideways scroller is as lost as one that widens the page.
STICKING_OUT = """() => {
  const edge = window.innerWidth + 0.5, out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= edge) continue;
    if (el.closest("pre, input, textarea, select, .scroll")) continue;
    out.push(`${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}" ends at ${Math.round(box.right)}`);
  }
  return out;
}"""


def no_horizontal_scroll(page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"{page.url} is {width[0]} px wide in {width[1]}"
    out = page.evaluate(STICKING_OUT)
    assert not out, f"{page.url}: past the right edge: {out[:5]}"


def disabled_endpoint(endpoint: Endpoint) -> Endpoint:
    """A second endpoint, auto-disabled, for the banner and held rows."""
    other = factories.endpoint(endpoint.merchant, url=LONG_URL + "-2")
    dead_delivery(other, type="order.refunded")
    endpoint_disable(
        endpoint=other,
        reason="auto-disabled: no success for 120 h and 24 failed attempts",
        by="auto-disable",
    )
    return other


def walk(page, base: str, endpoint: Endpoint, width: int) -> None:
    ep = f"{base}/portal/m/acme/endpoints/{endpoint.pk}"
    off = f"{base}/portal/m/acme/endpoints/{disabled_endpoint(endpoint).pk}"
    delivery = endpoint.deliveries.order_by("-pk").first()
    pages = {
        "endpoints": f"{base}/portal/m/acme/",
        "endpoint": f"{ep}/",
        "edit": f"{ep}/edit/",
        "example": f"{ep}/example/",
        "endpoint-deliveries": f"{ep}/deliveries/",
        "health": f"{ep}/health/",
        "recover": f"{ep}/recover/",
        "rotate": f"{ep}/secret/rotate/",
        "delete": f"{ep}/delete/",
        "disabled-endpoint": f"{off}/",
        "disabled-deliveries": f"{off}/deliveries/",
        "disabled-health": f"{off}/health/",
        "new-endpoint": f"{base}/portal/m/acme/endpoints/new/",
        "deliveries": f"{base}/portal/m/acme/deliveries/?status=dead",
        "deliveries-search": f"{base}/portal/m/acme/deliveries/?q=nothing&type=order.*",
        "delivery": f"{base}/portal/m/acme/deliveries/{delivery.pk}/",
        "catalogue": f"{base}/portal/m/acme/event-types/",
        "notifications": f"{base}/portal/m/acme/notifications/",
    }
    for name, address in pages.items():
        response = page.goto(address)
        assert response.status == 200, (name, response.status)
        no_horizontal_scroll(page)
        shot(page, f"platform-{width}-{name}")
    # Its only delivery is dead, so nothing is held: the banner does not say "0 held".
    page.goto(pages["disabled-endpoint"])
    expect(page.locator("#condition")).to_contain_text("No delivery is waiting for it")
    expect(page.locator("#reenable")).to_have_text("Re-enable")
    # The states a page reaches through its forms.
    steps = {
        "secret-revealed": (f"{ep}/", lambda: page.click("#reveal")),
        "filter-preview": (
            f"{ep}/edit/",
            lambda: (
                page.locator("#advanced").evaluate("d => { d.open = true; }"),
                page.click("#preview-filter"),
            ),
        ),
        "example-refused": (f"{ep}/example/", lambda: send_example(page, "{}")),
        "recover-count": (f"{ep}/recover/", lambda: page.click("#recover-preview")),
        "bulk-replay-confirm": (
            f"{base}/portal/m/acme/deliveries/?status=dead",
            lambda: page.click("#bulk-replay button[type=submit]"),
        ),
        "curl": (
            f"{base}/portal/m/acme/deliveries/{delivery.pk}/",
            lambda: page.click("details.snippet-box summary"),
        ),
        "notifications-refused": (
            f"{base}/portal/m/acme/notifications/",
            lambda: submit(page, "#id_extra_emails", "not-an-address"),
        ),
    }
    for name, (address, act) in steps.items():
        page.goto(address)
        act()
        page.wait_for_load_state()
        no_horizontal_scroll(page)
        shot(page, f"platform-{width}-{name}")


def send_example(page, data: str) -> None:
    page.fill("#id_data", data)
    page.click("#send-example")


def open_portal(page, link: str):
    """Open a link as its receiver does: the page, then its button."""
    page.goto(link)
    with page.expect_navigation():
        page.click("#link-open button[type=submit]")


def submit(page, field: str, value: str) -> None:
    page.fill(field, value)
    page.click("main form button[type=submit]")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_link_opens_every_page_without_horizontal_scroll(
    live_server, settings, world, width
):
    settings.PORTAL_PRODUCT_NAME = "Acme Payments"
    with chromium_page(width=width, height=900) as page:
        for name, address in {
            "login": f"{live_server.url}/portal/login/",
            "link": f"{live_server.url}/portal/link/no-such-token/",
        }.items():
            page.goto(address)
            no_horizontal_scroll(page)
            shot(page, f"platform-{width}-{name}")
        open_portal(page, portal_link(live_server))
        expect(page.locator("h1")).to_contain_text("Endpoints")
        expect(page.locator(".brand")).to_have_text("Acme Payments")
        expect(page.locator("main")).not_to_contain_text(world["globex"].pk)
        walk(page, live_server.url, world["endpoint"], width)
        # Only this merchant: another merchant's pages are 404.
        response = page.goto(f"{live_server.url}/portal/m/globex/")
        assert response.status == 404


def test_send_an_example_from_the_browser(live_server, world):
    endpoint = world["endpoint"]
    with chromium_page(width=1280, height=900) as page:
        open_portal(page, portal_link(live_server, role="developer"))
        page.goto(f"{live_server.url}/portal/m/acme/endpoints/{endpoint.pk}/example/")
        page.fill("#id_data", '{"order_id": 5}')
        page.click("#send-example")
        expect(page.locator('[data-field="data"] .errorlist')).to_contain_text(
            "order_id"
        )
        shot(page, "platform-example-refused")
        page.fill("#id_data", '{"order_id": "o-77", "amount": 3}')
        page.click("#send-example")
        expect(page.locator("h1")).to_contain_text("Delivery")
        expect(page.locator("#request-body")).to_contain_text("o-77")
        shot(page, "platform-example-sent")
    sent = endpoint.deliveries.order_by("-pk").first()
    assert sent.event.data == {"order_id": "o-77", "amount": 3}


def test_a_used_link_is_a_clear_page_in_the_browser(live_server, world):
    link = portal_link(live_server)
    with chromium_page(width=390, height=800) as page:
        open_portal(page, link)
        expect(page.locator("h1")).to_contain_text("Endpoints")
    with chromium_page(width=390, height=800) as page:
        page.goto(link)
        with page.expect_navigation() as opened:
            page.click("#link-open button[type=submit]")
        assert opened.value.status == 410
        expect(page.locator("h1")).to_have_text("This link has already been used")
        no_horizontal_scroll(page)
        shot(page, "platform-link-used")


class _Embedder:
    """A page on another origin that puts the portal link in an iframe."""

    def __init__(self, link: str) -> None:
        html = f'<!doctype html><h1>Platform</h1><iframe src="{link}" width="1000" height="700"></iframe>'

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = html.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        # localhost, like the live server: another origin (port) on the same
        # site, so the portal's Lax session cookie works inside the frame.
        self.origin = f"http://localhost:{self.server.server_port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("listed", [True, False])
def test_the_portal_shows_in_an_iframe_only_on_listed_origins(
    live_server, settings, world, listed
):
    embedder = _Embedder(portal_link(live_server))
    try:
        settings.PORTAL_FRAME_ANCESTORS = (
            [embedder.origin] if listed else ["https://elsewhere.example"]
        )
        with chromium_page(width=1280, height=900) as page:
            page.goto(embedder.origin)
            frame = page.frame_locator("iframe")
            if listed:
                frame.locator("#link-open button[type=submit]").click()
                expect(frame.locator("h1")).to_contain_text("Endpoints")
                shot(page, "platform-iframe")
            else:
                # The page's load event waits for its frames, refused or not.
                page.wait_for_load_state("load")
                assert "Endpoints" not in page.frames[1].content()
    finally:
        embedder.close()


def test_a_viewer_at_a_write_form_gets_the_403_page_and_a_way_back(live_server, world):
    endpoint = world["endpoint"]
    with chromium_page(width=390, height=800) as page:
        open_portal(page, portal_link(live_server, role="viewer"))
        ep = f"{live_server.url}/portal/m/acme/endpoints/{endpoint.pk}"
        response = page.goto(f"{ep}/edit/")
        assert response.status == 403
        expect(page.locator("h1")).to_have_text("You cannot change this")
        expect(page.locator("main")).not_to_contain_text("hidden-value")
        no_horizontal_scroll(page)
        shot(page, "platform-390-viewer-forbidden")
        page.click("#forbidden-back")
        expect(page).to_have_url(f"{ep}/")
        expect(page.locator("main")).not_to_contain_text("Edit")
