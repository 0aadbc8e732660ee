"""Every message a person reads, computed from the state it describes: each
wording function against a table of states (deliveries/words.py,
endpoints/words.py, the filter preview)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deliveries import words
from deliveries.ops.held import Held, HeldKind
from endpoints import words as endpoint_words
from endpoints.models import EndpointHealth
from relayproject.portal.views.endpoints import preview_verdict

NOW = datetime(2026, 12, 3, 11, 34, tzinfo=UTC)


@pytest.mark.parametrize(
    ("due", "in_flight", "rate", "said"),
    [
        (0, 0, None, "Endpoint enabled. No delivery was waiting for it."),
        (
            22,
            0,
            None,
            "Endpoint enabled; 22 held deliveries are due now: the dispatchers "
            "send them next.",
        ),
        (
            1,
            0,
            None,
            "Endpoint enabled; 1 held delivery is due now: the dispatchers send "
            "it next.",
        ),
        (
            20,
            0,
            0.5,
            "Endpoint enabled; 20 held deliveries are due now: the dispatchers "
            "send them next, at most 0.5 a second (its rate limit), so the last "
            "goes in about 40 s.",
        ),
        (
            3,
            2,
            None,
            "Endpoint enabled; 3 held deliveries are due now: the dispatchers "
            "send them next; 2 are being sent already.",
        ),
    ],
)
def test_reenable_says_what_the_rows_left_will_do(due, in_flight, rate, said):
    assert words.reenable_message(due=due, in_flight=in_flight, rate_limit=rate) == said


@pytest.mark.parametrize(
    ("due", "later", "said"),
    [
        (0, 0, "Endpoint enabled: sending starts again."),
        (
            2,
            1,
            "Endpoint enabled: sending starts again. 2 pending deliveries are due "
            "now. 1 waits for its retry time.",
        ),
    ],
)
def test_enable_says_which_rows_wait(due, later, said):
    assert words.enable_message(due=due, later=later) == said


PAUSED = Held(HeldKind.BREAKER_OPEN, "Paused after 10 failures, next try 11:42", NOW)


@pytest.mark.parametrize(
    ("held", "said"),
    [
        (
            Held(HeldKind.DUE, "Due now", None),
            "Replayed dlv_1: it is due now, sent as soon as its endpoint and merchant "
            "have a send slot free.",
        ),
        (
            PAUSED,
            "Replayed dlv_1: it is pending, but not sent yet. Paused after 10 "
            "failures, next try 11:42.",
        ),
        (
            Held(HeldKind.ENDPOINT_DISABLED, "Held: the endpoint is disabled", None),
            "Replayed dlv_1: it is pending, but not sent yet. Held: the endpoint is "
            "disabled.",
        ),
    ],
)
def test_replay_never_says_shortly_while_something_holds_the_row(held, said):
    assert words.replay_message(delivery_id="dlv_1", held=held) == said


@pytest.mark.parametrize(
    ("held", "refusal"),
    [
        (Held(HeldKind.RETRY_SCHEDULED, "Retrying (3 of 10) at 11:40", NOW), ""),
        (Held(HeldKind.SCHEDULED, "Due at 11:40", NOW), ""),
        (Held(HeldKind.DUE, "Due now", None), ""),
        (Held(HeldKind.RATE_LIMIT, "Held by the rate limit", NOW), ""),
        (
            PAUSED,
            "The endpoint is paused: paused after 10 failures, next try 11:42. "
            "Nothing is sent to it before then.",
        ),
        (
            Held(HeldKind.BREAKER_HALF_OPEN, "Paused after 10 failures: ...", None),
            "A test delivery is deciding whether sending resumes: wait for its answer.",
        ),
        (
            Held(HeldKind.ENDPOINT_DISABLED, "Held", None),
            "The endpoint is disabled: nothing is sent to it until it is enabled "
            "again.",
        ),
        (Held(HeldKind.IN_FLIGHT, "Being sent now", NOW), "It is being sent now."),
        (
            None,
            "Only a pending delivery can be retried now; replay a finished one.",
        ),
    ],
)
def test_retry_now_says_why_it_cannot_go_now(held, refusal):
    assert words.retry_now_refusal(held) == refusal


def health(**fields) -> EndpointHealth:
    return EndpointHealth(failure_threshold=10, cooldown_seconds=300, **fields)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"p95_ms": 2500.0, "sample_count": 5}, ""),  # too few samples to say
        ({"p95_ms": 1500.0, "sample_count": 50}, ""),
        (
            {"p95_ms": 2500.0, "sample_count": 50},
            "This endpoint is slow (p95 2,500 ms, over 2 s). Over 5 s it would be "
            "paused after 5 failures in a row instead of 10.",
        ),
        (
            {"p95_ms": 6000.0, "sample_count": 50},
            "This endpoint is very slow (p95 6,000 ms, over 5 s): it is paused "
            "after 5 failures in a row instead of 10.",
        ),
    ],
)
def test_slowness_is_said_by_the_breakers_real_rule(fields, said):
    assert endpoint_words.slow_words(health(**fields), base_threshold=10) == said


@pytest.mark.parametrize(
    ("fields", "active", "label"),
    [
        ({}, True, "Sending"),
        ({"breaker_state": "open"}, True, "Paused"),
        ({"breaker_state": "half_open"}, True, "Testing"),
        ({"success_rate": 0.55, "sample_count": 300}, True, "Degraded"),
        ({"success_rate": 0.55, "sample_count": 5}, True, "Sending"),
        ({"success_rate": 0.95, "sample_count": 300}, True, "Sending"),
        ({"breaker_state": "open"}, False, "Disabled"),
    ],
)
def test_state_label_never_says_closed_or_open(fields, active, label):
    got = endpoint_words.state_label(
        health(**fields), active=active, degraded_below=0.9
    )
    assert got.text == label


def test_degraded_words_give_the_rate_and_the_threshold():
    h = health(success_rate=0.54, sample_count=312)
    assert endpoint_words.degraded_words(h, below=0.9) == (
        "Degraded: 54% of 312 attempts succeeded in 24 h (under 90%)"
    )


@pytest.mark.parametrize(
    ("types", "wanted", "event_type", "data", "verdict"),
    [
        ([], None, "order.paid", {}, "sent"),
        (["order.*"], None, "order.paid", {}, "sent"),
        (["invoice.*"], None, "order.paid", {}, "not_subscribed"),
        (
            ["order.paid"],
            {"data": {"n": {"$gt": 5}}},
            "order.paid",
            {"n": 1},
            "filtered",
        ),
        (["order.paid"], {"data": {"n": {"$gt": 5}}}, "order.paid", {"n": 9}, "sent"),
        # A filter that lets it through does not make an unsubscribed type "sent".
        (
            ["invoice.*"],
            {"data": {"n": {"$gt": 5}}},
            "order.paid",
            {"n": 9},
            "not_subscribed",
        ),
    ],
)
def test_the_filter_preview_says_sent_only_for_what_would_be_sent(
    types, wanted, event_type, data, verdict
):
    assert (
        preview_verdict(event_types=types, wanted=wanted, type=event_type, data=data)
        == verdict
    )


@pytest.mark.parametrize(
    ("failures", "last_success", "said"),
    [
        (3, None, "3 failures in a row, it has never succeeded."),
        (
            1,
            NOW - timedelta(hours=2),
            "1 failure in a row, last success 2026-12-03 09:34 UTC.",
        ),
    ],
)
def test_the_failing_line_never_says_since_ever(failures, last_success, said):
    from deliveries.notifications.selectors import _failing_line
    from endpoints.models import Endpoint, Merchant

    endpoint = Endpoint(
        pk="ep_1", url="https://x.example/h", merchant=Merchant(slug="m")
    )
    endpoint.health = health(
        consecutive_failures=failures, last_success_at=last_success
    )
    assert _failing_line(endpoint).endswith(f"failing: {said}")


def test_make_run_gives_emails_its_own_port():
    makefile = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        ["make", "-n", "run", "PORT=8100"],
        cwd=makefile,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    devrun = [line for line in out.splitlines() if "relayproject.devrun" in line]
    assert devrun and "RELAY_BASE_URL=http://127.0.0.1:8100" in devrun[0]
    assert "127.0.0.1 8100" in devrun[0]
