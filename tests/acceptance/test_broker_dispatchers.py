"""Two real dispatchers over mixed HTTP and broker endpoints (issue 41), one
of them killed with SIGKILL mid-run: every event reaches every destination,
signed; no delivery is sent by two dispatchers at once; nothing is lost.

2,000 events over five endpoints, an HTTP receiver and one endpoint of each
broker kind, each subscribed to its own type: 400 events each, one delivery
per event. (2,000 events to all five, 10,000 deliveries, pass too, but take
well over a minute on a shared two-core machine.)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta
from itertools import pairwise

import pytest

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.services import EventInput, events_publish
from tests.support import factories
from tests.support.brokers import (
    BROKER_ENV,
    TARGETS,
    Message,
    broker_endpoint,
    verifier,
)
from tests.support.processes import unfinished, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

EVENTS = 400  # of each endpoint's own type: 2,000 events in all
ENV = {
    **BROKER_ENV,
    # The survivor declares the victim dead this soon after its last beat
    # and takes its rows over at once (deliveries/dispatch/rescue.py).
    "DISPATCHER_DEAD_AFTER_SECONDS": "4",
    "BREAKER_FAILURE_THRESHOLD": "1000",
}
ARGS = ["--concurrency=32", "--batch-size=100"]


def sends_overlapping(attempts) -> list[tuple]:
    """Pairs of attempts of one delivery, by different workers, whose sends
    overlap in time. A lease_expired row is no send (its worker died before
    recording), so only attempts with a measured duration count."""
    sends = defaultdict(list)
    for delivery_id, worker, started, ms in attempts:
        sends[delivery_id].append(
            (started, started + timedelta(milliseconds=ms), worker)
        )
    overlapping = []
    for delivery_id, spans in sends.items():
        spans.sort()
        for (start, end, worker), (later, _end, other) in pairwise(spans):
            if worker != other and later < end:
                overlapping.append((delivery_id, worker, other, start, later))
    return overlapping


def test_two_dispatchers_one_killed_deliver_every_event_to_http_and_every_broker(
    receiver, dispatchers
):
    merchant = factories.merchant()
    http = factories.endpoint(merchant, url=receiver.url, event_types=["to.http"])
    targets = [make() for make in TARGETS.values()]
    try:
        endpoints = {http.pk: http}
        consumers = {}
        for target in targets:
            target.fix()  # healthy from the start: this test is about the race
            endpoint = broker_endpoint(
                merchant,
                kind=target.kind,
                url=target.url,
                target=target.target,
                event_types=[f"to.{target.kind}"],
            )
            endpoints[endpoint.pk] = endpoint
            consumers[endpoint.pk] = target
        events_publish(
            merchant=merchant,
            events=[
                EventInput(type, {"n": n})
                for type in ["to.http", *(f"to.{t.kind}" for t in targets)]
                for n in range(EVENTS)
            ],
        )
        total = EVENTS * len(endpoints)
        victim, survivor = (
            dispatchers.start(*ARGS, f"--worker-id={name}", env=ENV)
            for name in ("victim", "survivor")
        )
        succeeded = Delivery.objects.filter(status="succeeded")
        # Killed while it holds rows (a tenth done and sends of its own in
        # flight): a kill between its claims would leave nothing to take over.
        held = Delivery.objects.filter(status="delivering", claimed_by="victim")
        wait_until(
            lambda: succeeded.count() >= total // 10 and held.exists(),
            timeout=60,
            what="a tenth of the deliveries, and the victim holding some",
        )
        victim.kill()
        wait_until(lambda: unfinished() == 0, timeout=90, what="every delivery")
        assert survivor.running, survivor.stderr[-3000:]

        received = {http.pk: [Message(r.headers, r.body) for r in receiver.received]}
        for endpoint_id, target in consumers.items():
            received[endpoint_id] = target.messages(at_least=EVENTS)
    finally:
        for target in targets:
            target.close()

    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    deliveries = {
        delivery_id: (endpoint_id, str(event_id))
        for delivery_id, endpoint_id, event_id in Delivery.objects.values_list(
            "pk", "endpoint_id", "event_id"
        )
    }
    assert len(deliveries) == total
    copies: Counter = Counter()
    for endpoint_id, messages in received.items():
        verify = verifier(endpoints[endpoint_id])
        for message in messages:
            event = verify(message)  # signed with its endpoint's secret
            headers = {k.lower(): v for k, v in message.headers.items()}
            delivery_id = headers["x-relay-delivery-id"]
            assert deliveries[delivery_id] == (endpoint_id, event["id"])
            copies[delivery_id] += 1
    assert set(copies) == set(deliveries), "every event reached every destination"

    lost = Attempt.objects.filter(error_kind=ErrorKind.LEASE_EXPIRED)
    assert lost.exists(), "the kill landed between claims: nothing was held"
    assert set(lost.values_list("worker_id", flat=True)) == {"victim"}, (
        "only the killed dispatcher lost leases"
    )
    lost_leases = set(lost.values_list("delivery_id", flat=True))
    assert {d for d, n in copies.items() if n > 1} <= lost_leases, (
        "only what the victim held when killed was sent again"
    )
    attempts = Attempt.objects.filter(response_ms__isnull=False).values_list(
        "delivery_id", "worker_id", "started_at", "response_ms"
    )
    assert sends_overlapping(attempts) == []
    workers = set(Attempt.objects.values_list("worker_id", flat=True))
    assert workers == {"victim", "survivor"}
