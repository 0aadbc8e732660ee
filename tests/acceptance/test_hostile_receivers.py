"""No receiver can hurt a real dispatcher process (issue 8's hostile receivers).

One event goes to an endpoint per hostile behaviour and to one healthy
endpoint, all served by the same loopback server. A real `run_dispatcher`
sends them all at once: each attempt is recorded with its classification
within HTTP_TIMEOUT_SECONDS plus a margin, the healthy endpoint gets the
event exactly once, and the process is still running afterwards.
"""

from __future__ import annotations

import signal

import pytest

from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from tests.support import factories
from tests.support.hostile import CASES, HostileReceiver
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

TIMEOUT = 2.0  # HTTP_TIMEOUT_SECONDS for the child; the trickles never finish
MARGIN = 1.5  # seconds: a loaded 2-core machine, not the receiver


def test_every_hostile_receiver_is_recorded_and_the_dispatcher_carries_on(
    dispatchers,
):
    with HostileReceiver() as rx:
        merchant = factories.merchant()
        endpoints = {
            c.name: factories.endpoint(merchant, url=rx.url(c.name)) for c in CASES
        }
        healthy = factories.endpoint(merchant, url=rx.url("ok"))
        events_publish(merchant=merchant, events=[EventInput("order.paid", {"n": 1})])
        child = dispatchers.start(
            "--concurrency=32",
            "--worker-id=hostile",
            env={
                "HTTP_TIMEOUT_SECONDS": str(TIMEOUT),
                # Retries an hour away: each endpoint's first attempt is the one
                # examined, and the healthy endpoint's only request is its first.
                "RETRY_BASE_SECONDS": "3600",
            },
        )

        wait_until(
            lambda: not Delivery.objects.filter(attempt_count=0).exists(),
            timeout=30 + TIMEOUT,
            what="a first attempt at every delivery",
        )

        assert child.running, child.stderr[-3000:]
        first = {
            a.endpoint_id: a
            for a in Attempt.objects.filter(number=1).order_by("started_at")
        }
        for case in CASES:
            attempt = first[endpoints[case.name].pk]
            assert (case.name, attempt.status_code, attempt.error_kind) == (
                case.name,
                case.status,
                case.error_kind,
            )
            assert attempt.response_ms <= (TIMEOUT + MARGIN) * 1000, case.name
            assert "\x00" not in attempt.response_body + attempt.error_message
            # Recorded as it came, not by the fallback for outcomes refused.
            assert "could not be stored" not in attempt.error_message, case.name
        assert rx.received.count("/ok") == 1
        ok = Delivery.objects.get(endpoint=healthy)
        assert (ok.status, ok.attempt_count) == ("succeeded", 1)
        assert not Delivery.objects.filter(status="delivering").exists()

        for name in ("retry-after-400-digits", "retry-after-5000-digits"):
            # Honoured and clamped to RETRY_MAX_DELAY_SECONDS (an hour).
            delivery = Delivery.objects.get(endpoint=endpoints[name])
            wait = delivery.next_attempt_at - first[endpoints[name].pk].started_at
            assert 3600 <= wait.total_seconds() <= 3600 + TIMEOUT + MARGIN, name

        nul = first[endpoints["nul-body"].pk]
        assert nul.response_body.startswith("before\ufffd\ufffdafter \ufffd")
        bomb = first[endpoints["gzip-bomb"].pk]
        assert bomb.outcome == "succeeded"
        assert 0 < len(bomb.response_body) <= 4096  # raw bytes, never the 50 MB

        child.signal(signal.SIGTERM)
        assert child.wait(TIMEOUT + 10) == 0, child.stderr[-3000:]
