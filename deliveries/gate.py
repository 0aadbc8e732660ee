"""Whether a claimed job may be sent now: the dispatcher's breaker awareness.

The breaker itself lives in the database (exact across dispatchers); this is
what one dispatcher does so that, once it opens, nothing more is sent:
- an endpoint whose last send failed gets one send at a time, and only after
  that failure is recorded and the stored breaker is seen still closed;
- breakers of the endpoints waiting in the queue are re-read every
  REFRESH_SECONDS, so another dispatcher opening one holds its jobs here too.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime

from endpoints.selectors import breakers_not_closed

REFRESH_SECONDS = 0.05

SEND = "send"
DEFER = "defer"  # keep it queued and ask again after the next outcome


class SendGate:
    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        # Endpoints seen open, and until when their jobs wait.
        self.held: dict[str, datetime] = {}
        self._failing: set[str] = set()
        self._unrecorded: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._next_refresh = 0.0

    def sending(self, endpoint_id: str) -> None:
        self._in_flight[endpoint_id] += 1

    def finished(self, endpoint_id: str, *, failed: bool | None) -> None:
        """A send ended (failed=None: it was never made)."""
        self._in_flight[endpoint_id] -= 1
        if failed:
            self._failing.add(endpoint_id)
            self._unrecorded[endpoint_id] += 1
        elif failed is False:
            self._failing.discard(endpoint_id)

    def recorded(self, endpoint_id: str, *, failed: bool) -> None:
        if failed:
            self._unrecorded[endpoint_id] -= 1

    def opened(self, until_by_endpoint: dict[str, datetime]) -> None:
        self.held.update(until_by_endpoint)

    def refresh(self, endpoint_ids: Iterable[str], *, now: datetime) -> None:
        """Re-read the stored breakers of these endpoints, at most every REFRESH_SECONDS."""
        if self.monotonic() < self._next_refresh:
            return
        self._next_refresh = self.monotonic() + REFRESH_SECONDS
        ids = set(endpoint_ids)
        if ids:
            for endpoint_id, next_probe in breakers_not_closed(
                endpoint_ids=ids
            ).items():
                self.held[endpoint_id] = next_probe or now
        self.held = {e: t for e, t in self.held.items() if t > now}

    def decide(
        self, endpoint_id: str, *, is_probe: bool, now: datetime
    ) -> str | datetime:
        """SEND, DEFER, or the time until which the job must wait."""
        if is_probe:
            return SEND
        held_until = self.held.get(endpoint_id)
        if held_until is not None and held_until > now:
            return held_until
        if endpoint_id in self._failing:
            if self._in_flight[endpoint_id] or self._unrecorded[endpoint_id]:
                return DEFER
            stored = breakers_not_closed(endpoint_ids=[endpoint_id])
            if endpoint_id in stored:
                self.held[endpoint_id] = stored[endpoint_id] or now
                return self.held[endpoint_id]
        return SEND
