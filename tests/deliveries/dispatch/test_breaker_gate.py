"""Once a breaker opens, nothing more is sent: within one dispatcher and across."""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connection

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth
from endpoints.probes import endpoint_breaker_open
from tests.support import factories
from tests.support.fakes import BlockingSender, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]


def dispatcher(concurrency: int) -> Dispatcher:
    return Dispatcher(
        worker_id="w",
        sender=BlockingSender(timeout=5, body_limit=100, allow_private=True),
        batch_size=20,
        concurrency=concurrency,
        lease_seconds=60,
        rand=random.Random(5),
    )


def publish(endpoint, n: int) -> None:
    events_publish(
        merchant=endpoint.merchant, events=[EventInput("a", {}) for _ in range(n)]
    )


def test_a_failing_endpoint_gets_exactly_threshold_sends(receiver, settings):
    # 4 go out at once and fail; then one at a time, each after the last
    # failure is recorded, until the 6th opens the breaker; then none.
    settings.BREAKER_FAILURE_THRESHOLD = 6
    receiver.respond = lambda r: Reply(status=500, delay=0.02)
    endpoint = factories.endpoint(url=receiver.url)
    publish(endpoint, 20)

    worker = dispatcher(concurrency=4)
    worker.run_once()
    worker.close()

    assert EndpointHealth.objects.get().breaker_state == "open"
    assert len(receiver.received) == 6
    assert Attempt.objects.count() == 6
    assert Delivery.objects.filter(status="pending", attempt_count=0).count() == 14


def test_a_breaker_opened_by_another_dispatcher_holds_jobs_already_claimed(receiver):
    healthy = factories.endpoint(url=receiver.url + "?healthy")
    other = factories.endpoint(healthy.merchant, url=receiver.url + "?other")
    opened = threading.Event()

    def respond(request):
        if not opened.is_set():
            # Another dispatcher opens `other` while ours holds its jobs, the
            # next in turn after this slow send to `healthy`. The dispatcher
            # re-reads breakers every 50 ms; the reply leaves it ten times
            # that, for a loaded machine.
            endpoint_breaker_open(endpoint_id=other.pk, reason="elsewhere")
            connection.close()
            opened.set()
            return Reply(status=200, delay=0.5)
        return Reply(status=200, delay=0.1)

    receiver.respond = respond
    events_publish(
        merchant=healthy.merchant,
        events=[EventInput("a", {}) for _ in range(3)],
        endpoint_ids=[healthy.pk],
    )
    events_publish(
        merchant=healthy.merchant,
        events=[EventInput("a", {}) for _ in range(5)],
        endpoint_ids=[other.pk],
    )

    worker = dispatcher(concurrency=1)
    worker.run_once()
    worker.close()

    assert [r.path for r in receiver.received] == ["/hook?healthy"] * 3
    held = Delivery.objects.filter(endpoint=other, status="pending", attempt_count=0)
    assert held.count() == 5
