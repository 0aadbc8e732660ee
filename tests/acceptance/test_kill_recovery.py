"""kill -9 mid-batch: leases bring every delivery back, nothing stays stuck."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from deliveries.models import Attempt, Delivery
from tests.support.fakes import Reply
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

LEASE = ["--lease-seconds=2", "--batch-size=10"]


def something_due() -> bool:
    return Delivery.objects.filter(
        status__in=["pending", "delivering"], next_attempt_at__lte=Now()
    ).exists()


def test_dispatchers_killed_mid_batch_resend_only_what_their_expired_leases_held(
    receiver, dispatchers
):
    receiver.respond = lambda _r: Reply(delay=0.3)
    ids = publish_fan_out(url=receiver.url, events=20, endpoints=2)
    victims = [
        dispatchers.start(
            "--drain", "--concurrency=4", f"--worker-id=victim-{n}", *LEASE
        )
        for n in range(2)
    ]
    receiver.wait_for(6, timeout=30)
    for victim in victims:
        victim.kill()
    assert Delivery.objects.filter(status="delivering").exists()

    # A fresh dispatcher can take the victims' rows only once their leases end,
    # and --drain stops when nothing is due right now: run it until all is done.
    for n in range(20):
        if not unfinished():
            break
        wait_until(something_due, timeout=10, what="an expired lease or a due row")
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
    assert twice, "the kill landed between batches: nothing was in flight"
    assert twice <= lost_leases
    assert max(counts.values()) == 2
