"""Ordered lanes with real dispatcher processes (deliveries/lanes.py).

The receiver holds each request a moment, so two sends of one lane at once
would overlap there; it notes, per endpoint and key, what arrived in which
order and the most it ever had in flight.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

import pytest

from deliveries.models import Attempt, Delivery
from deliveries.replay import delivery_replay
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.fakes import Received, Reply
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

# Retries due within a second; the first failures of ten lanes at once must
# not open the breaker (its pause is tested on its own).
QUICK = {
    "RETRY_BASE_SECONDS": "0.2",
    "RETRY_MAX_DELAY_SECONDS": "1",
    "BREAKER_FAILURE_THRESHOLD": "1000",
}


class LaneReceiver:
    """respond() for tests.support.fakes.Receiver: ?lane=ordered or
    ?lane=unordered in the URL tells the endpoints apart."""

    def __init__(self, *, hold: float, fail: dict[int, int] | None = None) -> None:
        self.hold = hold
        self.fail = dict(fail or {})  # event n -> failures still to answer
        self.lock = threading.Lock()
        self.in_flight: Counter = Counter()
        self.most: Counter = Counter()
        self.arrivals: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.delivered: dict[tuple[str, str], set[int]] = defaultdict(set)

    def __call__(self, request: Received) -> Reply:
        lane = "ordered" if "lane=ordered" in request.path else "unordered"
        data = request.json["data"]
        key = (lane, data["key"])
        with self.lock:
            self.in_flight[key] += 1
            self.most[key] = max(self.most[key], self.in_flight[key])
            self.arrivals[key].append(data["n"])
            failing = lane == "ordered" and self.fail.get(data["n"], 0) > 0
            if failing:
                self.fail[data["n"]] -= 1
        try:
            time.sleep(self.hold)  # a slow receiver, so overlapping sends meet
        finally:
            with self.lock:
                self.in_flight[key] -= 1
                if not failing:
                    self.delivered[key].add(data["n"])
        return Reply(status=500 if failing else 200)


def in_order(arrivals: list[int]) -> list[int]:
    """Arrivals with each run of repeats (a retry, a resend) taken as one."""
    return [n for i, n in enumerate(arrivals) if i == 0 or arrivals[i - 1] != n]


def publish(merchant, numbers, *, keys: int) -> None:
    events_publish(
        merchant=merchant,
        events=[
            EventInput(
                "order.paid",
                {"key": f"k{n % keys}", "n": n},
                ordering_key=f"k{n % keys}",
            )
            for n in numbers
        ],
    )


def count(endpoint, status="succeeded") -> int:
    return Delivery.objects.filter(endpoint=endpoint, status=status).count()


def test_two_dispatchers_keep_each_keys_order_through_retries_and_leave_others_alone(
    receiver, dispatchers
):
    keys, events = 10, 200
    # Each key's first event fails twice.
    lanes = LaneReceiver(hold=0.05, fail={n: 2 for n in range(keys)})
    receiver.respond = lanes
    merchant = factories.merchant()
    ordered = factories.endpoint(
        merchant, url=receiver.url + "?lane=ordered", ordered=True
    )
    unordered = factories.endpoint(merchant, url=receiver.url + "?lane=unordered")
    for n in range(2):
        dispatchers.start("--concurrency=16", f"--worker-id=d{n}", env=QUICK)
    for start in range(0, events, 20):  # published while they run
        publish(merchant, range(start, start + 20), keys=keys)

    ordered_when_unordered_done = []

    def unordered_done() -> bool:
        if count(unordered) < events:
            return False
        ordered_when_unordered_done.append(count(ordered))
        return True

    wait_until(unordered_done, timeout=60, what="the unordered endpoint's events")
    wait_until(
        lambda: count(ordered) == events, timeout=120, what="every ordered event"
    )

    for k in range(keys):
        key = f"k{k}"
        expected = list(range(k, events, keys))
        # In publish order, each after the previous one's success; the
        # first one's two failures are its own repeats.
        assert in_order(lanes.arrivals[("ordered", key)]) == expected, key
        assert lanes.arrivals[("ordered", key)][:3] == [k, k, k]
        assert lanes.most[("ordered", key)] == 1, key
        assert lanes.delivered[("ordered", key)] == set(expected)
        assert lanes.delivered[("unordered", key)] == set(expected)
    assert Attempt.objects.filter(endpoint=ordered, status_code=500).count() == 2 * keys
    # The unordered endpoint was not held behind the ordered one's lanes:
    # it had all its events while those were not half way.
    assert ordered_when_unordered_done[0] < events / 2, ordered_when_unordered_done
    assert max(lanes.most[k] for k in lanes.most if k[0] == "unordered") > 1


def test_a_dispatcher_killed_mid_lane_leaves_the_order_whole(receiver, dispatchers):
    lanes = LaneReceiver(hold=0.4)
    receiver.respond = lanes
    merchant = factories.merchant()
    ordered = factories.endpoint(
        merchant, url=receiver.url + "?lane=ordered", ordered=True
    )
    publish(merchant, range(24), keys=3)
    victim = dispatchers.start("--lease-seconds=2", "--worker-id=victim", env=QUICK)
    wait_until(
        lambda: (
            sum(len(a) for a in lanes.arrivals.values()) >= 4
            and sum(lanes.in_flight.values()) > 0
        ),
        timeout=30,
        what="the victim mid-lane, with sends in flight",
    )
    victim.kill()
    survivor = dispatchers.start("--lease-seconds=2", "--worker-id=survivor", env=QUICK)
    wait_until(lambda: count(ordered) == 24, timeout=60, what="every event")
    survivor.signal(15)
    assert survivor.wait(30) == 0

    resent = Attempt.objects.filter(error_kind="lease_expired").count()
    assert resent, "the kill landed between sends: nothing was in flight"
    for k in range(3):
        key = ("ordered", f"k{k}")
        # A resend of the one in flight is a repeat; nothing overtook it.
        assert in_order(lanes.arrivals[key]) == list(range(k, 24, 3)), key
        assert lanes.most[key] == 1


def test_a_dead_letter_lets_its_lane_go_on_and_its_replay_goes_out_of_order(
    receiver, dispatchers
):
    lanes = LaneReceiver(hold=0.0, fail={1: 1})
    receiver.respond = lanes
    merchant = factories.merchant()
    ordered = factories.endpoint(
        merchant, url=receiver.url + "?lane=ordered", ordered=True, max_attempts=1
    )
    publish(merchant, range(4), keys=1)
    first = dispatchers.start("--drain", "--worker-id=first", env=QUICK)
    assert first.wait(60) == 0, first.stderr[-3000:]

    assert lanes.arrivals[("ordered", "k0")] == [0, 1, 2, 3]
    dead = Delivery.objects.get(endpoint=ordered, status="dead")
    assert dead.event.data["n"] == 1
    assert count(ordered) == 3

    replayed = delivery_replay(delivery_id=dead.pk, now=utcnow())
    assert replayed.out_of_order and replayed.ordering_key == ""
    publish(merchant, [4], keys=1)  # the lane is empty: a new head, not blocked
    again = dispatchers.start("--drain", "--worker-id=again", env=QUICK)
    assert again.wait(60) == 0, again.stderr[-3000:]
    assert sorted(lanes.arrivals[("ordered", "k0")][4:]) == [1, 4]
    assert count(ordered) == 5


def test_breaker_pauses_and_the_rate_limit_keep_each_keys_order(receiver, dispatchers):
    """The breaker opens after the first failures and its probe is some
    lane's head; the rate limit gives claimed rows back unsent: neither may
    let a later event of a key go before an earlier one."""
    failures = {"left": 4}
    lanes = LaneReceiver(hold=0.02)
    inner = lanes.__call__

    def respond(request):
        reply = inner(request)
        with lanes.lock:
            if failures["left"] > 0:
                failures["left"] -= 1
                return Reply(status=503)
        return reply

    receiver.respond = respond
    merchant = factories.merchant()
    ordered = factories.endpoint(
        merchant,
        url=receiver.url + "?lane=ordered",
        ordered=True,
        rate_limit_per_second=5,  # below what three lanes could send
    )
    publish(merchant, range(30), keys=3)
    env = {**QUICK, "BREAKER_FAILURE_THRESHOLD": "3", "BREAKER_COOLDOWN_SECONDS": "1"}
    # Rows another dispatcher gives back while the breaker is half-open are
    # due again when the probe's lease ends: a short lease keeps that short.
    for n in range(2):
        dispatchers.start(
            "--concurrency=8", "--lease-seconds=5", f"--worker-id=b{n}", env=env
        )
    states = set()

    def done() -> bool:
        states.add(EndpointHealth.objects.get(endpoint=ordered).breaker_state)
        return count(ordered) == 30

    wait_until(done, timeout=90, what="every event")

    assert failures["left"] == 0
    assert "open" in states or "half_open" in states, states
    for k in range(3):
        key = ("ordered", f"k{k}")
        assert in_order(lanes.arrivals[key]) == list(range(k, 30, 3)), key
        assert lanes.most[key] == 1
