from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from endpoints.breaker import (
    Breaker,
    BreakerState,
    after_failure,
    after_success,
    allows_send,
    effective_threshold,
    is_slow,
    start_probe,
)

NOW = datetime(2026, 12, 2, 14, 0, 0, tzinfo=UTC)
THRESHOLD, BASE, MAX = 10, 300.0, 3600.0


def breaker(state=BreakerState.CLOSED, failures=0, cooldown=BASE, probe_in=None):
    opened = state != BreakerState.CLOSED
    return Breaker(
        state=state,
        consecutive_failures=failures,
        cooldown_seconds=cooldown,
        opened_at=NOW - timedelta(hours=1) if opened else None,
        next_probe_at=NOW + timedelta(seconds=probe_in) if opened else None,
    )


def fail(b, *, error="http 500", now=NOW, threshold=THRESHOLD):
    return after_failure(
        b,
        now=now,
        threshold=threshold,
        base_cooldown=BASE,
        max_cooldown=MAX,
        error=error,
    )


@pytest.mark.parametrize(
    ("before", "event", "state", "failures"),
    [
        (breaker(), "success", BreakerState.CLOSED, 0),
        (breaker(failures=3), "failure", BreakerState.CLOSED, 4),
        (breaker(failures=9), "failure", BreakerState.OPEN, 10),
        (breaker(BreakerState.OPEN, 10, probe_in=60), "failure", "open", 11),
        (breaker(BreakerState.OPEN, 10, probe_in=60), "success", "closed", 0),
        (breaker(BreakerState.HALF_OPEN, 10, probe_in=-1), "failure", "open", 11),
        (breaker(BreakerState.HALF_OPEN, 10, probe_in=-1), "success", "closed", 0),
    ],
)
def test_transitions(before, event, state, failures):
    if event == "success":
        after = after_success(before, now=NOW, base_cooldown=BASE)
    else:
        after = fail(before)
    assert (after.state, after.consecutive_failures) == (state, failures)


def test_opens_exactly_at_threshold():
    b = breaker()
    for _ in range(THRESHOLD - 1):
        b = fail(b)
        assert b.state == BreakerState.CLOSED
    b = fail(b, error="timeout")
    assert b == Breaker(
        state=BreakerState.OPEN,
        consecutive_failures=THRESHOLD,
        cooldown_seconds=BASE,
        opened_at=NOW,
        next_probe_at=NOW + timedelta(seconds=BASE),
        reason="opened after 10 consecutive failures (last: timeout)",
    )


def test_threshold_of_one_opens_on_first_failure():
    assert fail(breaker(), threshold=1).state == BreakerState.OPEN


@pytest.mark.parametrize(
    ("cooldown", "doubled"),
    [
        (300.0, 600.0),
        (600.0, 1200.0),
        (1200.0, 2400.0),
        (2400.0, MAX),
        (MAX, MAX),
        (0.0, BASE),  # a zero cooldown must not probe in a loop
    ],
)
def test_failed_probe_reopens_with_doubled_cooldown_capped(cooldown, doubled):
    after = fail(breaker(BreakerState.HALF_OPEN, 10, cooldown=cooldown, probe_in=-1))
    assert after.state == BreakerState.OPEN
    assert after.cooldown_seconds == doubled
    assert after.opened_at == NOW
    assert after.next_probe_at == NOW + timedelta(seconds=doubled)
    assert "http 500" in after.reason


def test_late_failure_while_open_keeps_the_probe_time():
    before = breaker(BreakerState.OPEN, 10, cooldown=600.0, probe_in=60)
    after = fail(before)
    assert (after.cooldown_seconds, after.next_probe_at, after.opened_at) == (
        before.cooldown_seconds,
        before.next_probe_at,
        before.opened_at,
    )


def test_success_resets_everything():
    before = breaker(BreakerState.HALF_OPEN, 25, cooldown=2400.0, probe_in=-1)
    assert after_success(before, now=NOW, base_cooldown=BASE) == Breaker(
        state=BreakerState.CLOSED,
        consecutive_failures=0,
        cooldown_seconds=BASE,
        opened_at=None,
        next_probe_at=None,
        reason="",
    )


@pytest.mark.parametrize(
    ("before", "granted"),
    [
        (breaker(BreakerState.OPEN, 10, probe_in=1), False),
        (breaker(BreakerState.OPEN, 10, probe_in=0), True),
        (breaker(BreakerState.OPEN, 10, probe_in=-1), True),
        (breaker(BreakerState.HALF_OPEN, 10, probe_in=-1), False),
        (breaker(), False),
    ],
)
def test_start_probe_only_once_cooldown_is_over(before, granted):
    probe = start_probe(before, now=NOW)
    if granted:
        assert probe == Breaker(**{**vars(before), "state": BreakerState.HALF_OPEN})
    else:
        assert probe is None


def test_start_probe_on_open_row_without_probe_time():
    b = Breaker("open", 10, BASE, opened_at=NOW, next_probe_at=None)
    assert start_probe(b, now=NOW).state == BreakerState.HALF_OPEN


@pytest.mark.parametrize(
    ("state", "allowed"),
    [("closed", True), ("open", False), ("half_open", False)],
)
def test_allows_send_only_when_closed(state, allowed):
    assert allows_send(breaker(BreakerState(state), probe_in=-1), now=NOW) is allowed


@pytest.mark.parametrize(
    ("base", "p95_ms", "samples", "threshold"),
    [
        (10, None, 0, 10),
        (10, 9000.0, 19, 10),
        (10, 5000.0, 100, 10),
        (10, 5000.1, 20, 5),
        (10, 3000.0, 100, 10),
        (11, 8000.0, 50, 5),
        (1, 8000.0, 50, 1),
        (2, 8000.0, 50, 1),
    ],
)
def test_effective_threshold(base, p95_ms, samples, threshold):
    got = effective_threshold(base_threshold=base, p95_ms=p95_ms, samples=samples)
    assert got == threshold


@pytest.mark.parametrize(
    ("p95_ms", "samples", "slow"),
    [
        (None, 100, False),
        (2000.0, 100, False),
        (2000.1, 20, True),
        (9000.0, 19, False),
    ],
)
def test_is_slow(p95_ms, samples, slow):
    assert is_slow(p95_ms=p95_ms, samples=samples) is slow
