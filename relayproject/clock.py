"""The one place that reads the wall clock.

Services take `now` as a parameter; callers that have no clock of their own
(API views, commands) use `utcnow()`. Tests pass a FakeClock instead.
"""

from __future__ import annotations

import time
from datetime import datetime

from django.utils import timezone


def utcnow() -> datetime:
    return timezone.now()


class SystemClock:
    """Wall time for timestamps, a monotonic clock for durations."""

    def now(self) -> datetime:
        return utcnow()

    def monotonic(self) -> float:
        return time.monotonic()
