"""An ordered pull endpoint end to end, all real processes: per key, a message
is handed out only once the one before it is acked, through nacks and a
consumer killed holding leases (tests/acceptance/test_pull_consumers.py has
the processes)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.services import EventInput, events_publish
from tests.acceptance.test_pull_consumers import (  # noqa: F401 - fixtures
    WAIT,
    all_succeeded,
    consumers,
    pull_endpoint,
    web,
)
from tests.support import factories
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

KEYS = 4
PER_KEY = 15


def test_per_key_order_holds_across_nacks_and_a_killed_consumer(
    dispatchers,
    consumers,  # noqa: F811
):
    merchant = factories.merchant()
    pull = pull_endpoint(merchant, ordered=True)
    dispatchers.start("--worker-id=ordered-a")
    dispatchers.start("--worker-id=ordered-b")
    events_publish(
        merchant=merchant,
        events=[
            EventInput("order.paid", {"key": k, "seq": n}, ordering_key=f"k{k}")
            for n in range(PER_KEY)
            for k in range(KEYS)
        ],
    )
    total = KEYS * PER_KEY
    # a nacks every fifth, then is killed holding a batch of lane heads.
    a = consumers("a", pull, "--answer-each", "--nack-every=5", "--stall-after=12")
    wait_until(a.stalled, timeout=WAIT, what="consumer a to stall mid-batch")
    a.kill()
    b = consumers("b", pull, "--answer-each", "--nack-every=7")
    wait_until(all_succeeded(pull, total), timeout=WAIT, what=f"{total} acks")

    rows = {
        r["pk"]: r
        for r in Delivery.objects.filter(endpoint=pull).values(
            "pk", "succeeded_at", "event__data"
        )
    }
    leases = defaultdict(list)  # delivery -> starts of its leases (server time)
    for lease in a.leases() + b.leases():
        leases[lease.id].append(lease.start)
    lanes = defaultdict(list)
    for pk, row in rows.items():
        lanes[row["event__data"]["key"]].append((row["event__data"]["seq"], pk))
    for key, lane in lanes.items():
        ids = [pk for _, pk in sorted(lane)]
        acked_at = [rows[pk]["succeeded_at"] for pk in ids]
        assert acked_at == sorted(acked_at), f"lane k{key} acked out of order"
        for before, after in zip(ids, ids[1:], strict=False):
            # Not handed out, even once, before the one ahead was acked.
            assert min(leases[after]) >= rows[before]["succeeded_at"], (key, after)
    # Both kinds of trouble happened on the way.
    assert a.answered("nacked") and b.answered("nacked")
    held = {x.id for x in a.leases()} - set(a.answered("acked") + a.answered("nacked"))
    assert held
    assert (
        set(
            Attempt.objects.filter(
                delivery_id__in=held, error_kind=ErrorKind.LEASE_EXPIRED
            ).values_list("delivery_id", flat=True)
        )
        == held
    )
    assert Attempt.objects.filter(endpoint=pull, outcome="succeeded").count() == total
