"""A real dispatcher tells the platform, through its own pipeline, that
delivery is failing: an operational endpoint on a loopback receiver gets
relay.endpoint.failing, relay.endpoint.disabled and one coalesced
relay.delivery.dead, each signed (verified with standardwebhooks)."""

from __future__ import annotations

import math

import pytest
from django.db.models import Max, Min
from standardwebhooks.webhooks import Webhook

from deliveries.models import Delivery
from deliveries.notifications.services import operational_endpoint_create
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.fakes import Receiver, Reply
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

STATUS_BY_PATH = {"/fail": 500, "/gone": 410, "/bad": 400}

FAST = {
    # Above the 50 dead letters of the burst, below the failing endpoint's
    # 10 deliveries x 10 attempts.
    "BREAKER_FAILURE_THRESHOLD": "60",
    "MAX_ATTEMPTS": "10",
    "BREAKER_COOLDOWN_SECONDS": "600",  # stays open for the whole test
    "RETRY_BASE_SECONDS": "0.05",
    "RETRY_MAX_DELAY_SECONDS": "0.1",
    "OPERATIONAL_CHECK_SECONDS": "1",
    # The burst must end inside one window, even on a loaded 2-core machine
    # (seen spread over 14 s there).
    "OPERATIONAL_COALESCE_SECONDS": "20",
    "EMAIL_URL": "dummymail://",
}


def test_operational_endpoint_hears_failing_disabled_and_dead(dispatchers, tmp_path):
    with (
        Receiver(lambda r: Reply(STATUS_BY_PATH.get(r.path, 200))) as merchant_rx,
        Receiver() as ops_rx,
    ):
        ops = operational_endpoint_create(url=ops_rx.url, now=utcnow())
        secret = ops.secrets.get().secret
        base = f"http://127.0.0.1:{merchant_rx.server.server_port}"
        merchant = factories.merchant("acme")
        failing = factories.endpoint(merchant, url=base + "/fail")
        gone = factories.endpoint(merchant, url=base + "/gone")
        bad = factories.endpoint(merchant, url=base + "/bad", max_attempts=1)
        for endpoint, count in ((failing, 10), (gone, 1), (bad, 50)):
            events_publish(
                merchant=merchant,
                events=[EventInput("order.paid", {"n": n}) for n in range(count)],
                endpoint_ids=[endpoint.pk],
            )
        dispatchers.start("--concurrency", "16", env=FAST)

        def heard() -> dict[tuple[str, str], list[dict]]:
            found: dict[tuple[str, str], list[dict]] = {}
            for r in ops_rx.received:
                headers = {k.lower(): v for k, v in r.headers.items()}
                body = Webhook(secret).verify(r.body, headers)  # raises if forged
                key = (body["type"], body["data"]["endpoint"]["id"])
                found.setdefault(key, []).append(body["data"])
            return found

        dead_key = ("relay.delivery.dead", bad.pk)
        expected = {
            ("relay.endpoint.failing", failing.pk),
            ("relay.endpoint.disabled", gone.pk),
            ("relay.delivery.dead", bad.pk),
        }
        wait_until(
            lambda: expected <= set(heard()),
            timeout=60,
            what=f"operational events {sorted(expected)}",
        )
        wait_until(
            lambda: sum(d["count"] for d in heard().get(dead_key, [])) >= 50,
            timeout=60,
            what="relay.delivery.dead events counting all 50 dead letters",
        )
        got = heard()
        assert len(got[("relay.endpoint.failing", failing.pk)]) == 1, got
        (failing_data,) = got[("relay.endpoint.failing", failing.pk)]
        assert failing_data["trigger"] == "breaker_open"
        assert failing_data["merchant"] == "acme"
        assert failing_data["last_status_code"] == 500
        (disabled,) = got[("relay.endpoint.disabled", gone.pk)]
        assert disabled["by"] == "receiver"
        assert disabled["reason"] == "the receiver answered 410 Gone"

        dead_events = got[dead_key]
        assert sum(d["count"] for d in dead_events) == 50, dead_events
        assert {d["last_status_code"] for d in dead_events} == {400}
        rows = Delivery.objects.filter(endpoint=bad)
        ids = set(rows.values_list("pk", flat=True))
        assert dead_events[0]["first_delivery_id"] in ids
        assert dead_events[-1]["last_delivery_id"] in ids
        # Coalesced: a burst that dies within one window, less the 2 s settle
        # and the 1 s check interval, is one event. On a loaded machine the 50
        # were seen dying over more than 20 s; then each further window the
        # burst spans may add one event, never one per dead letter.
        span = (rows.aggregate(s=Max("dead_at") - Min("dead_at"))["s"]).total_seconds()
        window = float(FAST["OPERATIONAL_COALESCE_SECONDS"])
        most = 1 + math.ceil(max(0.0, span - (window - 5)) / window)
        assert len(dead_events) <= most, (span, dead_events)
