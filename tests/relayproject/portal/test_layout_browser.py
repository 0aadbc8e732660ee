"""A Chromium walk of the portal and the staff console at 1280, 390 and 360
px: nothing runs off the side outside the boxes that scroll on purpose, no
control sits farther than 48 px from its label, and no word in a table cell
is broken in the middle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import EndpointHealth, Membership
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.browser import chromium_page, shot
from tests.support.portal import PASSWORD, user_with_role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TYPE = "subscription.payment_method.automatically_updated"

# Elements that may be wider than the screen because they scroll themselves.
SCROLLERS = (
    "pre, .scroll, #dead-letter-analysis, .results, #content-main > div.module, "
    ".inline-group .tabular"
)
# Parked off screen on purpose until focused (the skip link) or copied from.
OFFSCREEN = ".skip, .offscreen"

OVERFLOW_JS = """([scrollers, offscreen]) => {
  const out = [];
  const w = document.documentElement.clientWidth;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest(offscreen)) continue;
    if (el.closest(scrollers) && !el.matches(scrollers)) continue;
    const r = el.getBoundingClientRect();
    if (r.width && (r.right > w + 1 || r.left < -1)) {
      out.push(el.tagName + (el.id ? '#' + el.id : '') + '.' + el.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right) + ' ' + (el.textContent || '').trim().slice(0, 40));
    }
  }
  return out.slice(0, 8);
}"""

LABEL_JS = """() => {
  const far = [];
  for (const label of document.querySelectorAll('label[for]')) {
    const control = document.getElementById(label.htmlFor);
    if (!control || control.type === 'hidden') continue;
    const a = label.getBoundingClientRect(), b = control.getBoundingClientRect();
    if (!a.width || !b.width) continue;
    const dx = Math.max(0, b.left - a.right, a.left - b.right);
    const dy = Math.max(0, b.top - a.bottom, a.top - b.bottom);
    if (Math.hypot(dx, dy) > 48) far.push(label.htmlFor + ' ' + Math.round(Math.hypot(dx, dy)) + 'px');
  }
  return far;
}"""

# A line break between two letters or digits of one word, inside a table cell.
MID_WORD_JS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('td')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      // URLs and ids wrap anywhere on purpose; words and event types do not.
      if (node.parentElement.closest('.wrap, .mono, a.mono, pre')) continue;
      const text = node.textContent;
      let top = null;
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        if (!rect.height) continue;
        if (top !== null && rect.top > top + 2 && /\\w/.test(text[i]) && /\\w/.test(text[i - 1] || '')) {
          broken.push(text.trim().slice(0, 60));
          break;
        }
        top = rect.top;
      }
    }
  }
  return broken.slice(0, 5);
}"""


def world() -> dict:
    now = utcnow()
    merchant = factories.merchant("acme")
    other = factories.merchant("globex-incorporated-holdings")
    user = user_with_role(merchant, Membership.Role.OWNER, "alice")
    Membership.objects.create(user=user, merchant=other, role=Membership.Role.VIEWER)
    endpoint = factories.endpoint(
        merchant,
        url="http://127.0.0.1:9/hooks.example-merchant-with-a-long-name.com/webhooks/v2",
        event_types=[LONG_TYPE, "order.*"],
    )
    big = event_publish(
        merchant=merchant,
        type=LONG_TYPE,
        data={"rows": ["x" * 100] * 2000},  # about 200 KB
    ).created_deliveries[0]
    Attempt.objects.create(
        delivery=big,
        endpoint=endpoint,
        number=1,
        started_at=now,
        response_ms=40.0,
        status_code=503,
        error_kind="http_status",
        outcome="dead",
        request_url=endpoint.url,
        request_headers=[["webhook-id", big.event_id]],
        response_headers=[["Content-Type", "text/plain"]],
    )
    Delivery.objects.filter(pk=big.pk).update(
        status="dead", attempt_count=1, last_status_code=503, dead_at=now
    )
    EndpointHealth.objects.filter(pk=endpoint.pk).update(
        breaker_state="open",
        consecutive_failures=10,
        opened_at=now,
        next_probe_at=now + timedelta(minutes=5),
    )
    return {"endpoint": endpoint, "big": big}


def check(page, name: str) -> None:
    assert page.evaluate(OVERFLOW_JS, [SCROLLERS, OFFSCREEN]) == [], (
        f"{name}: runs off the side"
    )
    assert page.evaluate(LABEL_JS) == [], f"{name}: a control far from its label"
    assert page.evaluate(MID_WORD_JS) == [], f"{name}: a word broken in a cell"


@pytest.mark.parametrize("width", [1280, 390, 360])
def test_portal_pages_fit_and_read(live_server, settings, width):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    w = world()
    ep, big = w["endpoint"].pk, w["big"].pk
    base = f"{live_server.url}/portal/m/acme"
    pages = {
        "endpoints": f"{base}/",
        "endpoint": f"{base}/endpoints/{ep}/",
        "endpoint-edit": f"{base}/endpoints/{ep}/edit/",
        "health": f"{base}/endpoints/{ep}/health/",
        "deliveries": f"{base}/deliveries/",
        "delivery-large": f"{base}/deliveries/{big}/",
        "notifications": f"{base}/notifications/",
        "catalogue": f"{base}/event-types/",
        "recover": f"{base}/endpoints/{ep}/recover/",
    }
    with chromium_page(width=width, height=900) as page:
        page.goto(f"{live_server.url}/portal/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        for name, url in pages.items():
            page.goto(url)
            check(page, name)
            if name == "delivery-large":
                # Folded: the page is not the body's length twice over.
                assert page.evaluate("document.body.scrollHeight") < 6000
                assert "@" in page.text_content("#curl")
            if name == "deliveries" and width < 700:
                # The filters leave room for the log on the first screen.
                top = page.evaluate(
                    "document.querySelector('table.deliveries')"
                    ".getBoundingClientRect().top"
                )
                assert top < 900, f"the log starts at {top:.0f} px"
            shot(page, f"layout-{name}-{width}")
        page.goto(pages["endpoints"])
        page.click("details.switcher summary")
        left = page.evaluate(
            "document.querySelector('.switcher ul').getBoundingClientRect().left"
        )
        assert left >= 0, "the merchant switcher opens off the left edge"


@pytest.mark.parametrize("width", [1280, 390, 360])
def test_console_pages_fit(live_server, width):
    w = world()
    User.objects.create_superuser("staff", password=PASSWORD)
    pages = {
        "dead-letters": "/admin/deliveries/deadletter/",
        "deliveries": "/admin/deliveries/delivery/",
        "delivery": f"/admin/deliveries/delivery/{w['big'].pk}/change/",
        "pipeline": "/admin/deliveries/delivery/pipeline/",
    }
    with chromium_page(width=width, height=900) as page:
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        for name, url in pages.items():
            page.goto(live_server.url + url)
            assert page.evaluate(OVERFLOW_JS, [SCROLLERS, OFFSCREEN]) == [], (
                f"{name} overflows"
            )
            shot(page, f"layout-admin-{name}-{width}")
