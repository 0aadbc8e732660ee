"""A claim shares its rows among merchants, then among their endpoints with due
work, none past its max_in_flight."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from deliveries.dispatch import claiming, single_claims
from deliveries.dispatch.shares import fair_shares, merchant_shares
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth
from tests.support import factories
from tests.support.fakes import FakeClock

LEASE = 30


@pytest.mark.parametrize(
    ("limit", "rooms", "shares"),
    [
        (10, [("a", 32), ("b", 32)], {"a": 5, "b": 5}),
        (10, [("a", 32), ("b", 2)], {"a": 8, "b": 2}),
        (3, [("a", 32), ("b", 32), ("c", 32), ("d", 32)], {"a": 1, "b": 1, "c": 1}),
        (10, [("a", 0), ("b", 3)], {"b": 3}),
        (0, [("a", 5)], {}),
        (5, [], {}),
    ],
)
def test_fair_shares_go_round_robin_oldest_first_within_each_room(limit, rooms, shares):
    assert fair_shares(limit=limit, rooms=rooms) == shares


@pytest.mark.parametrize(
    ("limit", "merchants", "shares"),
    [
        # Merchants first: the one with 4 endpoints gets half, not four fifths.
        (
            10,
            [
                ("m", 64, [("a", 32), ("b", 32), ("c", 32), ("d", 32)]),
                ("n", 64, [("e", 32)]),
            ],
            {"a": 2, "b": 1, "c": 1, "d": 1, "e": 5},
        ),
        # A merchant's room caps its endpoints together.
        (
            10,
            [("m", 3, [("a", 32), ("b", 32)]), ("n", 64, [("c", 32)])],
            {"a": 2, "b": 1, "c": 7},
        ),
        # ... and its endpoints' rooms cap the merchant.
        (
            10,
            [("m", 64, [("a", 1), ("b", 2)]), ("n", 64, [("c", 32)])],
            {"a": 1, "b": 2, "c": 7},
        ),
        # A full merchant gets nothing; oldest due first when rows run short.
        (
            2,
            [
                ("m", 0, [("a", 5)]),
                ("n", 9, [("b", 5)]),
                ("o", 9, [("c", 5)]),
                ("p", 9, [("d", 5)]),
            ],
            {"b": 1, "c": 1},
        ),
        (0, [("m", 5, [("a", 5)])], {}),
        (5, [], {}),
    ],
)
def test_merchant_shares_go_round_robin_among_merchants_then_endpoints(
    limit, merchants, shares
):
    assert merchant_shares(limit=limit, merchants=merchants) == shares


def publish(endpoint, n: int, clock: FakeClock) -> None:
    events_publish(
        merchant=endpoint.merchant,
        events=[EventInput("a", {"n": i}) for i in range(n)],
        endpoint_ids=[endpoint.pk],
        now=clock.now(),
    )


def claimed_per_endpoint(claim: claiming.Claim) -> Counter:
    return Counter(
        Delivery.objects.filter(pk__in=claim.delivery_ids).values_list(
            "endpoint_id", flat=True
        )
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_backends
def test_a_backlog_behind_one_endpoint_does_not_fill_the_claim():
    clock = FakeClock()
    merchant = factories.merchant()
    slow = factories.endpoint(merchant, url="http://127.0.0.1:9/slow")
    quick = factories.endpoint(merchant, url="http://127.0.0.1:9/quick")
    publish(slow, 60, clock)  # older
    clock.advance(1)
    publish(quick, 60, clock)

    claim = claiming.claim_batch(
        worker_id="w", now=clock.now(), lease_seconds=LEASE, limit=20
    )

    assert claimed_per_endpoint(claim) == {slow.pk: 10, quick.pk: 10}


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_backends
def test_max_in_flight_counts_every_live_claim_and_frees_with_the_lease(settings):
    settings.ENDPOINT_MAX_IN_FLIGHT = 5
    clock = FakeClock()
    merchant = factories.merchant()
    default = factories.endpoint(merchant, url="http://127.0.0.1:9/default")
    own = factories.endpoint(merchant, url="http://127.0.0.1:9/own", max_in_flight=2)
    publish(default, 20, clock)
    publish(own, 20, clock)

    def claim(worker: str) -> Counter:
        return claimed_per_endpoint(
            claiming.claim_batch(
                worker_id=worker, now=clock.now(), lease_seconds=LEASE, limit=50
            )
        )

    assert claim("a") == {default.pk: 5, own.pk: 2}
    assert claim("b") == {}  # a's claims are live: nothing left to give
    claiming.release(
        worker_id="a",
        lease_until=Delivery.objects.filter(claimed_by="a").first().claimed_until,
        delivery_ids=list(
            Delivery.objects.filter(claimed_by="a", endpoint=own).values_list(
                "pk", flat=True
            )
        ),
        due_at=clock.now() + timedelta(hours=1),
    )
    assert claim("b") == {own.pk: 2}
    clock.advance(LEASE + 1)  # every lease has run out: they count no more
    assert claim("c") == {default.pk: 5, own.pk: 2}


def claimed_per_merchant(claim: claiming.Claim) -> Counter:
    return Counter(
        Delivery.objects.filter(pk__in=claim.delivery_ids).values_list(
            "endpoint__merchant__slug", flat=True
        )
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_backends
def test_a_merchant_with_many_endpoints_due_first_does_not_fill_the_claim():
    clock = FakeClock()
    noisy = factories.merchant("noisy")
    for n in range(30):
        publish(factories.endpoint(noisy, url=f"http://127.0.0.1:9/n{n}"), 2, clock)
    clock.advance(1)
    quiet = factories.endpoint(factories.merchant("quiet"), url="http://127.0.0.1:9/q")
    publish(quiet, 10, clock)

    # Round-robin among endpoints alone would give the quiet merchant
    # nothing: its endpoint is the 31st oldest-due of a claim of 20.
    claim = claiming.claim_batch(
        worker_id="w", now=clock.now(), lease_seconds=LEASE, limit=20
    )

    assert claimed_per_merchant(claim) == {"noisy": 10, "quiet": 10}
    assert set(claimed_per_endpoint(claim).values()) == {1, 10}


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_backends
def test_a_merchants_cap_counts_live_claims_of_all_its_endpoints(settings):
    settings.MERCHANT_MAX_IN_FLIGHT = 6
    clock = FakeClock()
    merchant = factories.merchant("capped")
    first, *others = [
        factories.endpoint(merchant, url=f"http://127.0.0.1:9/e{n}") for n in range(3)
    ]
    own = factories.merchant("own")
    own.max_in_flight = 2  # staff's override wins over the setting
    own.save(update_fields=["max_in_flight"])

    def claim(worker: str) -> Counter:
        return claimed_per_merchant(
            claiming.claim_batch(
                worker_id=worker, now=clock.now(), lease_seconds=LEASE, limit=50
            )
        )

    publish(first, 2, clock)
    assert claim("a") == {"capped": 2}  # the first endpoint has nothing due now
    for endpoint in others:
        publish(endpoint, 10, clock)
    publish(factories.endpoint(own, url="http://127.0.0.1:9/own"), 10, clock)

    # a's two live claims count against the merchant though their endpoint
    # has no due work left: 4 more, not 6.
    assert claim("b") == {"capped": 4, "own": 2}
    assert claim("c") == {}
    clock.advance(LEASE + 1)  # every lease has run out: they count no more
    assert claim("d") == {"capped": 6, "own": 2}


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_backends
def test_a_breakers_probe_waits_for_room_under_its_merchants_cap():
    clock = FakeClock()
    merchant = factories.merchant("capped")
    merchant.max_in_flight = 1
    merchant.save(update_fields=["max_in_flight"])
    healthy = factories.endpoint(merchant, url="http://127.0.0.1:9/healthy")
    failing = factories.endpoint(merchant, url="http://127.0.0.1:9/failing")
    publish(healthy, 1, clock)
    publish(failing, 1, clock)
    EndpointHealth.objects.filter(endpoint=failing).update(
        breaker_state="open",
        opened_at=clock.now() - timedelta(seconds=600),
        next_probe_at=clock.now(),
    )
    sent = claiming.claim_batch(
        worker_id="a", now=clock.now(), lease_seconds=LEASE, limit=10
    )
    assert claimed_per_endpoint(sent) == {healthy.pk: 1}

    def probe() -> set[str]:
        return single_claims.claim_probes(
            worker_id="b", now=clock.now(), lease_seconds=LEASE
        ).probe_ids

    # The merchant's one send is out: the probe would be a second.
    assert probe() == set()
    health = EndpointHealth.objects.get(endpoint=failing)
    assert (health.breaker_state, health.next_probe_at) == ("open", clock.now())
    claiming.release(
        worker_id="a",
        lease_until=sent.lease_until,
        delivery_ids=sent.delivery_ids,
        due_at=clock.now() + timedelta(hours=1),
    )
    assert probe() == set(
        Delivery.objects.filter(endpoint=failing).values_list("pk", flat=True)
    )
