"""A merchant ends a pause from the portal: with two real dispatcher processes
and a real receiver, the next delivery is sent within seconds, once; a second
click while that test delivery is in flight sends nothing more."""

from __future__ import annotations

import signal
import threading
from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.models import Attempt, Delivery, DispatcherHeartbeat
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support.fakes import Received, Receiver, Reply
from tests.support.portal import user_with_role
from tests.support.processes import publish_fan_out, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

WITHIN = 15  # seconds; the pause had an hour to run


def test_try_now_sends_the_next_delivery_at_once_by_one_dispatcher_of_two(
    client, dispatchers
):
    arrived: list[str] = []
    first_arrived = threading.Event()
    release = threading.Event()

    def hold_then_fail(request: Received) -> Reply:
        # Held until the second click is made, so that click lands while the
        # test delivery is in flight; it then fails, keeping the pause.
        arrived.append(request.headers["X-Relay-Delivery-Id"])
        first_arrived.set()
        release.wait(30)
        return Reply(status=503)

    with Receiver(hold_then_fail) as receiver:
        ids = publish_fan_out(url=receiver.url, events=3, endpoints=1)
        now = utcnow()
        # Paused for an hour, and every delivery waits for its retry time.
        Delivery.objects.update(next_attempt_at=now + timedelta(hours=1))
        EndpointHealth.objects.update(
            breaker_state="open",
            consecutive_failures=10,
            cooldown_seconds=600,
            opened_at=now,
            next_probe_at=now + timedelta(hours=1),
        )
        health = EndpointHealth.objects.select_related("endpoint__merchant").get()
        endpoint = health.endpoint
        owner = user_with_role(endpoint.merchant, "owner", "owner")
        client.force_login(owner)
        try_now = reverse(
            "portal:endpoint_try_now", args=[endpoint.merchant.slug, endpoint.pk]
        )
        children = [dispatchers.start(f"--worker-id=d{n}") for n in range(2)]
        wait_until(
            lambda: DispatcherHeartbeat.objects.count() == 2,
            timeout=60,
            what="both dispatchers to beat",
        )

        page = client.post(try_now, follow=True).content.decode()
        assert "Trying now" in page
        assert first_arrived.wait(WITHIN), "nothing was sent after Try now"

        # The second click, while the test delivery is on the wire.
        page = client.post(try_now, follow=True).content.decode()
        assert "a test delivery is already deciding" in page
        # ... and left no second probe due: it stays the first one's lease.
        assert EndpointHealth.objects.get().next_probe_at > utcnow()
        release.set()
        wait_until(
            lambda: (
                Attempt.objects.exists()
                and EndpointHealth.objects.filter(cooldown_seconds=1200).exists()
            ),
            timeout=WITHIN,
            what="the test delivery's failure to be recorded",
        )
        for child in children:
            child.signal(signal.SIGTERM)
        for child in children:
            assert child.wait(30) == 0, child.stderr[-3000:]

    assert len(arrived) == 1
    assert arrived[0] in ids
    (attempt,) = Attempt.objects.all()
    assert attempt.worker_id in {"d0", "d1"}
    health.refresh_from_db()
    # The failed test doubled the wait; the other two still wait their turn.
    assert (health.breaker_state, health.cooldown_seconds) == ("open", 1200)
    assert Delivery.objects.filter(attempt_count=0).count() == 2
