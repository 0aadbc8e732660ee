"""The pure thresholds: warnings at 50% and 90% of the window, and auto-disable
only with the window, the minimum failures and the 12-hour spread all met."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from deliveries.notifications.policy import (
    Episode,
    Thresholds,
    auto_disable_at,
    auto_disable_due,
    warning_due,
)

T0 = datetime(2026, 12, 1, tzinfo=UTC)
T = Thresholds(window=timedelta(hours=120), min_failures=20)


def h(n: float) -> timedelta:
    return timedelta(hours=n)


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    [
        (h(59.99), None),
        (h(60), 0.5),
        (h(107.99), 0.5),
        (h(108), 0.9),
        (h(500), 0.9),
    ],
)
def test_warning_fraction_of_the_window(elapsed, expected):
    episode = Episode(since=T0, last=T0 + elapsed, failures=30)
    assert warning_due(episode, now=T0 + elapsed, t=T) == expected


@pytest.mark.parametrize(
    ("now", "last", "failures", "due"),
    [
        (h(120), h(119), 20, True),  # every condition exactly met
        (h(120) - timedelta(seconds=1), h(119), 20, False),  # one second early
        (h(120), h(119), 19, False),  # one failure short
        (h(120), h(12), 20, True),  # spread exactly 12 h
        (h(120), h(12) - timedelta(seconds=1), 20, False),  # spread just short
        (h(500), h(2), 500, False),  # many failures, all in one afternoon
    ],
)
def test_auto_disable_needs_window_failures_and_spread(now, last, failures, due):
    episode = Episode(since=T0, last=T0 + last, failures=failures)
    assert auto_disable_due(episode, now=T0 + now, t=T) is due


def test_auto_disable_at_is_the_end_of_the_window():
    assert auto_disable_at(Episode(since=T0, last=T0, failures=1), t=T) == T0 + h(120)
