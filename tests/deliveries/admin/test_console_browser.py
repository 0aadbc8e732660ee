"""The staff console in Chromium at 1280 px: every list fits, its actions and the
percentile columns are in view, and the pipeline chart's legend is readable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from deliveries.dispatch.heartbeat import heartbeat_touch
from endpoints.apikeys import apikey_revoke
from endpoints.models import ApiKey, EndpointHealth
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.support import factories, seed
from tests.support.browser import chromium_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "https://hooks.example-merchant-with-a-long-name.com/webhooks/v2/incoming/"


def console() -> dict:
    """A console with the things that used to overflow: long URLs and errors,
    raw floats, an open breaker with held rows, a disabled endpoint, a stale
    dispatcher, revoked keys."""
    now = utcnow()
    merchants = [factories.merchant(f"merchant-{n}") for n in range(3)]
    endpoints = [
        factories.endpoint(merchants[i % 3], url=f"http://127.0.0.1:9/{LONG}{i}")
        for i in range(6)
    ]
    for i, endpoint in enumerate(endpoints):
        EndpointHealth.objects.filter(pk=endpoint.pk).update(
            p50_ms=120.4 + i * 311.7,
            p95_ms=2504.699473501205 - i * 97.3,
            p99_ms=4011.38 + i,
            sample_count=1500 + i,
            success_rate=1.0 - i * 0.0731,
            is_slow=i < 2,
        )
        for n in range(4):
            status = ("pending", "succeeded", "dead", "pending")[n]
            seed.delivery(
                endpoint,
                status=status,
                created_at=now - timedelta(minutes=i * 4 + n),
                attempts=3,
                with_attempts=True,
                last_status_code=503,
                last_error="HTTPSConnectionPool: read timed out after 10 s " * 3,
                succeeded_at=now if status == "succeeded" else None,
                dead_at=now - timedelta(minutes=n) if status == "dead" else None,
            )
    endpoint_breaker_open(
        endpoint_id=endpoints[0].pk,
        reason="10 consecutive failures (last: http 503)",
        now=now,
    )
    endpoint_disable(endpoint=endpoints[1], reason="410 Gone from the receiver")
    heartbeat_touch(worker_id="dispatch-host-a-4242", started_at=now, now=now)
    heartbeat_touch(
        worker_id="dispatch-host-b-17", started_at=now, now=now - timedelta(minutes=7)
    )
    for i in range(4):
        key = ApiKey.objects.create(
            name=f"billing-service-production-key-{i}",
            merchant=merchants[i % 3] if i % 2 else None,
            prefix=f"rk_{i:05d}",
            key_hash=f"{i:064x}",
            last_used_at=now,
        )
        if i == 3:
            apikey_revoke(key=key)
    return {"endpoints": endpoints}


PAGES = {
    "admin-index": "/admin/",
    "admin-pipeline": "/admin/deliveries/delivery/pipeline/",
    "admin-deliveries": "/admin/deliveries/delivery/",
    "admin-dead-letters": "/admin/deliveries/deadletter/",
    "admin-events": "/admin/deliveries/event/",
    "admin-endpoints": "/admin/endpoints/endpoint/",
    "admin-endpoint-health": "/admin/endpoints/endpointhealth/",
    "admin-api-keys": "/admin/endpoints/apikey/",
}

# Per list: a selector whose every match must lie inside the viewport.
IN_VIEW = {
    "admin-deliveries": "#result_list th.column-replay_button",
    "admin-dead-letters": "#result_list th.column-replay_button, #dead-letter-analysis a.button",
    "admin-endpoint-health": "#result_list th.column-p50, #result_list th.column-p95, "
    "#result_list th.column-p99, #result_list th.column-success",
    "admin-api-keys": "#result_list th.column-revoked_at",
    "admin-endpoints": "#result_list th.column-deliveries_links",
}


def sign_in(page, live_server) -> None:
    User.objects.create_superuser("ops", "ops@example.com", "correct-horse-battery")
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", "correct-horse-battery")
    page.click("input[type=submit]")
    page.wait_for_selector("#relay-operations")


def overflow(page) -> int:
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def outside(page, selector: str) -> list[str]:
    """The matches of `selector` cut by the window or by a box that clips them
    (the changelist's table scrolls inside its own box)."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].filter(el => {
            let right = window.innerWidth;
            for (let box = el.parentElement; box; box = box.parentElement) {
              if (getComputedStyle(box).overflowX !== "visible") {
                right = Math.min(right, box.getBoundingClientRect().right);
              }
            }
            return el.getBoundingClientRect().right > right + 1;
          }).map(el => el.outerHTML.slice(0, 80))""",
        selector,
    )


CONTRAST = """(selector) => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = getComputedStyle(el).backgroundColor;
      if (c && !c.startsWith("rgba(0, 0, 0, 0)") && c !== "transparent") return c;
    }
    return "rgb(255, 255, 255)";
  };
  const el = document.querySelector(selector);
  const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(rgb(background(el)))];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


def test_every_staff_list_fits_at_1280_px(live_server):
    world = console()
    with chromium_page(width=1280, height=900) as page:
        sign_in(page, live_server)
        for name, path in PAGES.items():
            page.goto(f"{live_server.url}{path}")
            shot(page, f"{name}-1280")
            assert overflow(page) <= 0, f"{name} scrolls sideways"
            if name in IN_VIEW:
                assert page.locator(IN_VIEW[name]).count() > 0, name
                assert outside(page, IN_VIEW[name]) == [], name
        page.goto(
            f"{live_server.url}/admin/deliveries/delivery/"
            f"?endpoint__id__exact={world['endpoints'][0].pk}"
        )
        assert "next try" in page.inner_text("#result_list")


def test_health_values_read_at_a_glance(live_server):
    console()
    with chromium_page(width=1280, height=900) as page:
        sign_in(page, live_server)
        page.goto(f"{live_server.url}{PAGES['admin-endpoint-health']}")
        table = page.inner_text("#result_list")
    assert "2,505" in table and "2504.69" not in table
    assert "100 %" in table and "92.7 %" in table
    assert "paused since" in table and "after 10 failures in a row" in table
    assert "open since" not in table


def test_pipeline_alerts_and_a_legend_with_aa_contrast(live_server):
    console()
    with chromium_page(width=1280, height=900) as page:
        sign_in(page, live_server)
        page.goto(f"{live_server.url}{PAGES['admin-pipeline']}")
        kinds = page.eval_on_selector_all(
            "#alerts li", "els => els.map(e => e.dataset.kind)"
        )
        assert {"breaker_open", "endpoint_disabled", "dispatcher_stale"} <= set(kinds)
        assert page.evaluate(CONTRAST, ".chart-legend") >= 4.5
        shot(page, "admin-pipeline-alerts")


def test_a_delivery_page_shows_the_body_times_and_no_next_attempt_when_done(
    live_server,
):
    endpoint = factories.endpoint()
    now = utcnow()
    done = seed.delivery(
        endpoint,
        status="succeeded",
        created_at=now,
        succeeded_at=now,
        attempts=1,
        with_attempts=True,
        last_status_code=200,
    )
    with chromium_page(width=1280, height=900) as page:
        sign_in(page, live_server)
        page.goto(f"{live_server.url}/admin/deliveries/delivery/{done.pk}/change/")
        text = page.inner_text("#content")
        shot(page, "admin-delivery-1280")
        assert overflow(page) <= 0
    assert f'"id": "{done.event_id}"' in text
    assert "Next attempt" not in text
    assert now.strftime("%Y-%m-%d %H:%M:%S UTC") in text
    assert "10 ms" in text or "10\n" in text  # the attempt's 10.0 ms, whole


def test_the_console_on_a_phone_keeps_wide_tables_inside_their_box(live_server):
    """At 390 px the admin's own responsive CSS applies; what is ours must not
    push the page wider (alerts, chart, held reasons)."""
    console()
    with chromium_page(width=390, height=844) as page:
        sign_in(page, live_server)
        for name in ("admin-pipeline", "admin-deliveries", "admin-endpoint-health"):
            page.goto(f"{live_server.url}{PAGES[name]}")
            shot(page, f"{name}-390")
        page.goto(f"{live_server.url}{PAGES['admin-pipeline']}")
        assert overflow(page) <= 0
