"""When an endpoint counts as failing, warned about, or auto-disabled. Pure.

An episode is the run of failed attempts since the last success (or since a
re-enable). Time is always a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

# The rule: the first and last failure at least this far apart, so a
# burst of failures on one bad afternoon never disables an endpoint.
MIN_SPREAD = timedelta(hours=12)
# relay.endpoint.failing is sent at these fractions of the auto-disable window.
WARN_AT = (0.5, 0.9)


@dataclass(frozen=True)
class Thresholds:
    window: timedelta  # AUTO_DISABLE_AFTER_HOURS without a success
    min_failures: int  # AUTO_DISABLE_MIN_FAILURES
    min_spread: timedelta = MIN_SPREAD

    @classmethod
    def from_settings(cls) -> Thresholds:
        return cls(
            window=timedelta(hours=settings.AUTO_DISABLE_AFTER_HOURS),
            min_failures=settings.AUTO_DISABLE_MIN_FAILURES,
        )


@dataclass(frozen=True)
class Episode:
    """The failed attempts since the last success: how many, first and last."""

    since: datetime
    last: datetime
    failures: int

    def elapsed(self, now: datetime) -> timedelta:
        return now - self.since


def warning_due(episode: Episode, *, now: datetime, t: Thresholds) -> float | None:
    """The largest WARN_AT fraction of the window this episode has reached."""
    reached = [f for f in WARN_AT if episode.elapsed(now) >= t.window * f]
    return max(reached) if reached else None


def auto_disable_due(episode: Episode, *, now: datetime, t: Thresholds) -> bool:
    return (
        episode.elapsed(now) >= t.window
        and episode.failures >= t.min_failures
        and episode.last - episode.since >= t.min_spread
    )


def auto_disable_at(episode: Episode, *, t: Thresholds) -> datetime:
    """The earliest time the window alone allows disabling (failures still count)."""
    return episode.since + t.window
