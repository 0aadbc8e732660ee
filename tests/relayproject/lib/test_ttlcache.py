"""The per-process cache: trust for a time, forget on demand, a bound."""

from __future__ import annotations

import pytest

from relayproject.lib.ttlcache import TtlCache


def test_an_entry_is_trusted_until_its_time_is_up_and_not_a_moment_longer():
    cache: TtlCache[str, int] = TtlCache(ttl=2.0, max_entries=10)
    cache.put("a", 1, now=100.0)
    assert cache.get("a", now=100.0) == 1
    assert cache.get("a", now=101.999) == 1
    assert cache.get("a", now=102.0) is None
    # Gone, not just hidden: a clock going back does not bring it back.
    assert cache.get("a", now=100.5) is None


def test_a_clock_that_went_backwards_does_not_extend_the_trust():
    cache: TtlCache[str, int] = TtlCache(ttl=2.0, max_entries=10)
    cache.put("a", 1, now=100.0)
    assert cache.get("a", now=99.0) is None


def test_the_ttl_is_read_on_every_get():
    ttl = [10.0]
    cache: TtlCache[str, int] = TtlCache(ttl=lambda: ttl[0], max_entries=10)
    cache.put("a", 1, now=0.0)
    assert cache.get("a", now=5.0) == 1
    ttl[0] = 1.0
    assert cache.get("a", now=5.0) is None


def test_without_a_ttl_an_entry_stays_until_forgotten():
    cache: TtlCache[str, int] = TtlCache(ttl=None, max_entries=10)
    cache.put("a", 1, now=0.0)
    cache.put("b", 2, now=0.0)
    assert cache.get("a", now=1e9) == 1
    cache.forget("a")
    assert cache.get("a") is None and cache.get("b") == 2
    cache.clear()
    assert cache.get("b") is None and len(cache) == 0


def test_a_full_cache_starts_afresh_rather_than_growing():
    cache: TtlCache[int, int] = TtlCache(ttl=None, max_entries=3)
    for n in range(3):
        cache.put(n, n)
    cache.put(1, 10)  # replacing an entry is not growing
    assert len(cache) == 3 and cache.get(1) == 10
    cache.put(3, 3)
    assert len(cache) == 1 and cache.get(3) == 3 and cache.get(0) is None


def test_the_default_clock_is_the_one_given():
    now = [0.0]
    cache: TtlCache[str, int] = TtlCache(ttl=1.0, max_entries=10, clock=lambda: now[0])
    cache.put("a", 1)
    now[0] = 0.5
    assert cache.get("a") == 1
    now[0] = 1.5
    assert cache.get("a") is None


def test_a_bound_below_one_is_refused():
    with pytest.raises(ValueError):
        TtlCache(ttl=None, max_entries=0)
