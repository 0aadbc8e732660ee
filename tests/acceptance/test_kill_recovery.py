"""kill -9 mid-batch: leases bring every delivery back, nothing stays stuck."""

from __future__ import annotations

import threading

import pytest
from django.db.models.functions import Now

from deliveries.models import Attempt, Delivery
from tests.support.fakes import Received, Reply
from tests.support.processes import (
    publish_fan_out,
    received_per_delivery,
    unfinished,
    wait_until,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

LEASE_SECONDS = 20
# Long enough that no lease runs out before the kill on a loaded machine (a
# victim would take over the other's rows, and a row could be sent three
# times); the rescue then waits for the leases to end.
LEASE = [f"--lease-seconds={LEASE_SECONDS}", "--batch-size=10"]
# The held replies wait for the kill; a send that timed out meanwhile would
# be recorded as a failure, not left to its lease.
SLOW_RECEIVER = {"HTTP_TIMEOUT_SECONDS": "60"}


def something_due() -> bool:
    return Delivery.objects.filter(
        status__in=["pending", "delivering"], next_attempt_at__lte=Now()
    ).exists()


def test_dispatchers_killed_mid_batch_resend_only_what_their_expired_leases_held(
    receiver, dispatchers
):
    # The first replies go back at once, so the victims record a few
    # deliveries; the rest are held until the victims are dead, so a kill
    # always lands with sends in flight, however slow the machine.
    answered_at_once = 4
    killed = threading.Event()
    lock = threading.Lock()
    arrived: list[str] = []

    def respond(request: Received) -> Reply:
        with lock:
            arrived.append(request.headers["X-Relay-Delivery-Id"])
            at_once = len(arrived) <= answered_at_once
        if not at_once:
            killed.wait(60)
        return Reply()

    receiver.respond = respond
    ids = publish_fan_out(url=receiver.url, events=20, endpoints=2)
    victims = [
        dispatchers.start(
            "--drain",
            "--concurrency=4",
            f"--worker-id=victim-{n}",
            *LEASE,
            env=SLOW_RECEIVER,
        )
        for n in range(2)
    ]
    succeeded = Delivery.objects.filter(status="succeeded")
    wait_until(
        lambda: succeeded.count() == answered_at_once and len(arrived) >= 6,
        timeout=60,
        what="recorded deliveries and sends in flight",
    )
    for victim in victims:
        victim.kill()
    recorded = set(succeeded.values_list("pk", flat=True))
    in_flight = set(arrived[answered_at_once:])
    killed.set()
    assert in_flight <= set(
        Delivery.objects.filter(status="delivering").values_list("pk", flat=True)
    )
    assert not Attempt.objects.filter(error_kind="lease_expired").exists(), (
        "a lease ran out before the kill: the machine is slower than LEASE_SECONDS"
    )

    # A fresh dispatcher can take the victims' rows only once their leases end,
    # and --drain stops when nothing is due right now: run it until all is done.
    for n in range(20):
        if not unfinished():
            break
        wait_until(
            something_due,
            timeout=LEASE_SECONDS + 30,
            what="an expired lease or a due row",
        )
        rescuer = dispatchers.start(
            "--drain", "--concurrency=8", f"--worker-id=rescuer-{n}", *LEASE
        )
        assert rescuer.wait(30) == 0, rescuer.stderr[-3000:]

    assert unfinished() == 0
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    counts = received_per_delivery(receiver)
    assert set(counts) == set(ids)
    twice = {d for d, c in counts.items() if c > 1}
    lost_leases = set(
        Attempt.objects.filter(error_kind="lease_expired").values_list(
            "delivery_id", flat=True
        )
    )
    assert in_flight <= twice, "what was in flight at the kill was sent again"
    assert twice <= lost_leases
    assert max(counts.values()) == 2
    assert all(counts[pk] == 1 for pk in recorded), "recorded, never resent"
