from __future__ import annotations

import pytest

from endpoints.ratelimit import Bucket, capacity, refill, take

T0 = 1_800_000_000.0


def drain(bucket, *, rate, now, times):
    results = []
    for _ in range(times):
        granted, bucket, wait = take(bucket, rate_per_second=rate, now=now)
        results.append((granted, wait))
    return results, bucket


@pytest.mark.parametrize(
    ("rate", "burst", "wait"),
    [
        (10.0, 10, 0.1),
        (1.0, 1, 1.0),
        (2.5, 2, 0.2),  # 0.5 token left over, 0.5 more at 2.5/s
        (0.5, 1, 2.0),
    ],
)
def test_full_bucket_bursts_to_capacity_then_refuses_with_wait(rate, burst, wait):
    bucket = Bucket(tokens=capacity(rate), updated_at=T0)
    results, _ = drain(bucket, rate=rate, now=T0, times=burst + 1)
    assert results[:burst] == [(True, 0.0)] * burst
    granted, waited = results[burst]
    assert not granted
    assert waited == pytest.approx(wait)


def test_refused_take_keeps_tokens():
    granted, after, wait = take(
        Bucket(tokens=0.25, updated_at=T0), rate_per_second=1.0, now=T0
    )
    assert (granted, after, wait) == (False, Bucket(0.25, T0), 0.75)


@pytest.mark.parametrize(
    ("rate", "elapsed", "tokens_after"),
    [
        (10.0, 0.1, 1.0),
        (10.0, 0.55, 5.5),
        (0.5, 1.0, 0.5),
        (0.5, 2.0, 1.0),
        (2.0, 0.0, 0.0),
    ],
)
def test_refill_accrues_at_rate(rate, elapsed, tokens_after):
    assert refill(0.0, T0, rate=rate, now=T0 + elapsed) == pytest.approx(tokens_after)


@pytest.mark.parametrize(
    ("rate", "tokens", "elapsed", "cap"),
    [
        (10.0, 0.0, 3600.0, 10.0),
        (10.0, 9.5, 1.0, 10.0),
        (0.5, 0.0, 3600.0, 1.0),
        (0.2, 1.0, 100.0, 1.0),
    ],
)
def test_refill_never_passes_capacity(rate, tokens, elapsed, cap):
    assert refill(tokens, T0, rate=rate, now=T0 + elapsed) == cap


def test_waiting_the_returned_time_grants_the_next_token():
    rate = 0.5
    granted, bucket, _ = take(Bucket(1.0, T0), rate_per_second=rate, now=T0)
    assert granted
    granted, bucket, wait = take(bucket, rate_per_second=rate, now=T0)
    assert (granted, wait) == (False, 2.0)
    granted, bucket, wait = take(bucket, rate_per_second=rate, now=T0 + 1.0)
    assert (granted, wait) == (False, 1.0)
    granted, bucket, wait = take(bucket, rate_per_second=rate, now=T0 + 2.0)
    assert (granted, wait) == (True, 0.0)
    assert bucket == Bucket(tokens=0.0, updated_at=T0 + 2.0)


def test_sustained_rate_over_time():
    rate, bucket, granted = 4.0, Bucket(0.0, T0), 0
    for step in range(1, 101):  # 10 s in 0.1 s steps
        ok, bucket, _ = take(bucket, rate_per_second=rate, now=T0 + step / 10)
        granted += ok
    assert granted == pytest.approx(40, abs=1)


def test_clock_behind_neither_removes_tokens_nor_credits_twice():
    bucket = Bucket(tokens=0.0, updated_at=T0)
    _, behind, _ = take(bucket, rate_per_second=1.0, now=T0 - 5.0)
    assert behind == Bucket(tokens=0.0, updated_at=T0)
    granted, _, wait = take(behind, rate_per_second=1.0, now=T0 + 0.5)
    assert (granted, wait) == (False, 0.5)


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_non_positive_rate_is_refused(rate):
    with pytest.raises(ValueError):
        take(Bucket(1.0, T0), rate_per_second=rate, now=T0)
