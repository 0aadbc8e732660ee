"""The retry policy's pure parts: the wait an explicit schedule gives, the
window it spans, and which of the endpoint's, merchant's or relay's values
is in force."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from deliveries.retry import next_delay
from endpoints.models import Endpoint, Merchant
from endpoints.retry_policy import (
    FROM_ENDPOINT,
    FROM_MERCHANT,
    FROM_RELAY,
    policy_errors,
    policy_in_force,
    scheduled_wait,
    window_seconds,
)

NOW = datetime(2026, 12, 2, 14, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("failed", "wait"), [(1, 5.0), (2, 30.0), (3, 300.0), (4, 300.0), (50, 300.0)]
)
def test_attempt_n_plus_1_waits_the_nth_delay_the_last_repeating(failed, wait):
    assert scheduled_wait([5, 30, 300], failed) == wait


def test_a_schedule_is_followed_exactly_without_jitter():
    delays = {
        next_delay(
            failed_attempts=2,
            status_code=500,
            retry_after_header=None,
            base=30,
            max_delay=3600,
            rand=random.Random(seed),
            now=NOW,
            schedule=(1.0, 2.0),
        )
        for seed in range(5)
    }
    assert delays == {2.0}


def test_retry_after_on_a_429_still_wins_over_the_schedule():
    delay = next_delay(
        failed_attempts=1,
        status_code=429,
        retry_after_header="7",
        base=30,
        max_delay=3600,
        rand=random.Random(1),
        now=NOW,
        schedule=(100.0,),
    )
    assert delay == 7.0


@pytest.mark.parametrize(
    ("schedule", "attempts", "window"),
    [([1, 2], 3, 3.0), ([1, 2], 5, 7.0), ([60], 1, 0.0), ([10, 20, 30], 2, 10.0)],
)
def test_the_window_is_the_sum_of_the_waits_between_attempts(
    schedule, attempts, window
):
    assert window_seconds(schedule, attempts) == window


def test_the_full_jitter_window_counts_each_wait_at_its_cap(settings):
    settings.RETRY_BASE_SECONDS, settings.RETRY_MAX_DELAY_SECONDS = 10, 50
    # Waits after 1, 2, 3 failures: min(50, 20), min(50, 40), min(50, 80).
    assert window_seconds(None, 4) == 20 + 40 + 50


@pytest.mark.parametrize(
    ("given", "field", "bound"),
    [
        ({"max_attempts": 21}, "max_attempts", "RETRY_MAX_ATTEMPTS_LIMIT"),
        ({"timeout_seconds": 31}, "timeout_seconds", "HTTP_TIMEOUT_MAX_SECONDS"),
        ({"retry_schedule": []}, "retry_schedule", "list of delays"),
        ({"retry_schedule": [1, -2]}, "retry_schedule", "above 0"),
        ({"retry_schedule": [1, "2"]}, "retry_schedule", "above 0"),
    ],
)
def test_values_past_the_bounds_are_refused_naming_the_bound(
    settings, given, field, bound
):
    settings.RETRY_MAX_ATTEMPTS_LIMIT = 20
    settings.HTTP_TIMEOUT_MAX_SECONDS = 30
    errors = policy_errors(**given)
    assert list(errors) == [field]
    assert bound in errors[field][0]


def test_a_window_past_its_bound_is_refused_naming_the_bound(settings):
    settings.RETRY_MAX_WINDOW_SECONDS = 100
    errors = policy_errors(retry_schedule=[60], window_of=([60], 3))
    assert "RETRY_MAX_WINDOW_SECONDS" in errors["retry_schedule"][0]
    assert policy_errors(retry_schedule=[50], window_of=([50], 3)) == {}


def unsaved(merchant: dict, endpoint: dict) -> Endpoint:
    return Endpoint(merchant=Merchant(slug="m", name="m", **merchant), **endpoint)


def test_the_endpoints_values_win_over_the_merchants(settings):
    policy = policy_in_force(
        unsaved(
            {"retry_schedule": [9], "max_attempts": 9, "timeout_seconds": 9},
            {"retry_schedule": [1, 2], "max_attempts": 3, "timeout_seconds": 4},
        )
    )
    assert (policy.retry_schedule, policy.max_attempts, policy.timeout_seconds) == (
        [1, 2],
        3,
        4,
    )
    assert {
        policy.retry_schedule_from,
        policy.max_attempts_from,
        policy.timeout_seconds_from,
    } == {FROM_ENDPOINT}


def test_each_value_the_endpoint_leaves_empty_comes_from_the_merchant_else_the_relay(
    settings,
):
    settings.MAX_ATTEMPTS, settings.HTTP_TIMEOUT_SECONDS = 7, 8
    policy = policy_in_force(unsaved({"retry_schedule": [5]}, {"max_attempts": 2}))
    assert (policy.retry_schedule, policy.retry_schedule_from) == ([5], FROM_MERCHANT)
    assert (policy.max_attempts, policy.max_attempts_from) == (2, FROM_ENDPOINT)
    assert (policy.timeout_seconds, policy.timeout_seconds_from) == (8, FROM_RELAY)
