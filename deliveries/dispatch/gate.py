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
        self._failures_seen: Counter[str] = Counter()
        self._next_refresh = 0.0

    def sending(self, endpoint_id: str) -> None:
        self._in_flight[endpoint_id] += 1

    def answered(self, endpoint_id: str, *, failed: bool) -> None:
        """Called by the send thread the moment a send ends, before anything else
        is sent: the next thread to pick a job for this endpoint must know."""
        if failed:
            self._failing.add(endpoint_id)
            self._failures_seen[endpoint_id] += 1
        else:
            self._failing.discard(endpoint_id)

    def finished(self, endpoint_id: str, *, failed: bool | None) -> None:
        """The main thread collected a send (failed=None: it was never made)."""
        self._in_flight[endpoint_id] -= 1
        if failed:
            self._unrecorded[endpoint_id] += 1

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
        # Jobs already handed to the pool ask the gate again before sending.
        ids = set(endpoint_ids) | {e for e, n in self._in_flight.items() if n > 0}
        if ids:
            for endpoint_id, next_probe in breakers_not_closed(
                endpoint_ids=ids
            ).items():
                self.held[endpoint_id] = next_probe or now
        self.held = {e: t for e, t in self.held.items() if t > now}

    def is_held(self, endpoint_id: str, *, now: datetime) -> bool:
        """Is this endpoint seen open? Read-only, safe from the send threads."""
        held_until = self.held.get(endpoint_id)
        return held_until is not None and held_until > now

    def ticket(self, endpoint_id: str) -> int:
        """Taken when a job is let through: how many failures were known then."""
        return self._failures_seen[endpoint_id]

    def must_wait(self, endpoint_id: str, *, ticket: int, now: datetime) -> bool:
        """Asked by a send thread: did a failure arrive after this job was let
        through, or was the endpoint seen open since? Then it goes back."""
        return self._failures_seen[endpoint_id] != ticket or self.is_held(
            endpoint_id, now=now
        )

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
