"""Which endpoints a dispatcher holds back because their breaker is open.

The breaker itself lives in the database (exact across dispatchers). This is
the dispatcher thread's view of it: endpoints seen open, from a flush that
opened them here or from re-reading, every REFRESH_SECONDS, the breakers of
every endpoint it holds jobs for (so one opened by another dispatcher stops
this one within that time). The send loop is told the held set whenever it
changes and gives those endpoints' queued jobs back; only probes go through.
The one-at-a-time rule for failing endpoints lives with the lanes (lanes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from endpoints.selectors import breakers_not_closed
from relayproject.lib import citus

REFRESH_SECONDS = 0.05


class BreakerWatch:
    def __init__(self, *, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic
        # Endpoints seen open or half-open, with when their rows are due again.
        self.held: dict[str, datetime] = {}
        self._next_refresh = 0.0
        # Each endpoint's merchant, from the jobs handed over (learn): on
        # Citus the re-read names it, one statement per merchant's shard.
        self.merchant_of: dict[str, int] = {}

    def learn(self, merchant_of: Mapping[str, int | None]) -> None:
        """Endpoints' merchants, as the jobs loaded for them carry."""
        self.merchant_of.update((e, m) for e, m in merchant_of.items() if m is not None)

    def due_at(self, endpoint_id: str, *, now: datetime) -> datetime:
        """When a held endpoint's given-back job should be due again."""
        return max(self.held.get(endpoint_id, now), now)

    def opened(self, until_by_endpoint: dict[str, datetime]) -> bool:
        """A flush left these open; returns whether the held set changed."""
        before = set(self.held)
        self.held.update(until_by_endpoint)
        return set(self.held) != before

    def closed(self, endpoint_ids: Iterable[str]) -> bool:
        """A flush left these closed (a probe succeeded); returns whether it changed."""
        gone = [e for e in endpoint_ids if e in self.held]
        for endpoint_id in gone:
            del self.held[endpoint_id]
        return bool(gone)

    def refresh(self, endpoint_ids: Iterable[str], *, now: datetime) -> bool | None:
        """Re-read these endpoints' stored breakers (and the held ones), at most
        every REFRESH_SECONDS. Returns whether the held set changed, None when
        it was not time yet."""
        if self.monotonic() < self._next_refresh:
            return None
        self._next_refresh = self.monotonic() + REFRESH_SECONDS
        ids = set(endpoint_ids) | set(self.held)
        if not ids:
            return False
        stored = self._stored(ids)
        held = {e: (next_probe or now) for e, next_probe in stored.items()}
        changed = set(held) != set(self.held)
        self.held = held
        return changed

    def _stored(self, ids: set[str]) -> dict[str, datetime | None]:
        if not citus.on():
            return breakers_not_closed(endpoint_ids=ids)
        groups: dict[int | None, set[str]] = {}
        for endpoint_id in ids:
            groups.setdefault(self.merchant_of.get(endpoint_id), set()).add(endpoint_id)
        stored: dict[str, datetime | None] = {}
        for merchant_id, group in groups.items():
            stored |= breakers_not_closed(endpoint_ids=group, merchant_id=merchant_id)
        return stored
