"""A small per-process cache: entries trusted for a time, forgotten on demand,
and a bound on how many are kept.

Each process keeps a few things it would otherwise read per request (live API
keys, a merchant's audience, the catalogue's validators). What differs between
them is how long an entry may be trusted; the rest is the same, so it lives
here once. Shared by a process's threads: every operation is one or two dict
operations, and a lost race only costs a read from the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """key -> value, each trusted for `ttl` seconds after it was put.

    ttl: seconds, a function returning them (read on every get, so a setting
    changed at run time applies), or None for "until forgotten" (a cache
    whose entries the reader checks itself). When `max_entries` are held the
    next put starts afresh: simpler than eviction order, and a full cache is
    a sign of far more keys than a deployment has, not a steady state.
    `now` is seconds on any one clock, the same for put and get
    (time.monotonic by default).
    """

    def __init__(
        self,
        *,
        ttl: float | Callable[[], float] | None,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[K, tuple[V, float]] = {}

    def get(self, key: K, *, now: float | None = None) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        value, put_at = entry
        ttl = self._ttl() if callable(self._ttl) else self._ttl
        if ttl is not None:
            age = (self._clock() if now is None else now) - put_at
            # A clock that went backwards does not extend the trust either.
            if not 0 <= age < ttl:
                self._entries.pop(key, None)
                return None
        return value

    def put(self, key: K, value: V, *, now: float | None = None) -> None:
        if key not in self._entries and len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = (value, self._clock() if now is None else now)

    def forget(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
