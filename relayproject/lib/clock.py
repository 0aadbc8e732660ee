"""The one place that reads the wall clock.

Services take `now` as a parameter; callers that have no clock of their own
(API views, pages, commands) use `utcnow()`. Tests drive those callers with
`frozen(at)` and pass a FakeClock to the dispatcher, so no test depends on the
date it happens to run on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Protocol

from django.utils import timezone

# Read through a module attribute, so `frozen` reaches every importer of
# `utcnow` (they hold the function, not the source).
_source: Callable[[], datetime] = timezone.now


def utcnow() -> datetime:
    return _source()


@contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """Make `utcnow()` answer `at` inside the block (tests: pages, commands)."""
    global _source
    before = _source
    _source = lambda: at  # noqa: E731 - a constant clock
    try:
        yield
    finally:
        _source = before


class Clock(Protocol):
    """What the dispatcher reads time from, and nothing else: wall time for
    timestamps the database keeps, a monotonic reading for its own timing
    (when to claim, record, probe, refresh, give up). A FakeClock (tests/
    fakes.py) stands in for both."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """Wall time for timestamps, a monotonic clock for durations."""

    def now(self) -> datetime:
        return utcnow()

    def monotonic(self) -> float:
        return time.monotonic()
