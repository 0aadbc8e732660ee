from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from deliveries.models import ErrorKind
from deliveries.retry import (
    Verdict,
    backoff_seconds,
    classify,
    next_delay,
    parse_retry_after,
)

NOW = datetime(2026, 12, 2, 14, 0, 0, tzinfo=UTC)
BASE, MAX_DELAY = 30.0, 3600.0


@pytest.mark.parametrize(
    ("status_code", "error_kind", "verdict"),
    [
        (200, None, Verdict.SUCCEEDED),
        (201, None, Verdict.SUCCEEDED),
        (204, None, Verdict.SUCCEEDED),
        (299, None, Verdict.SUCCEEDED),
        (301, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (302, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (400, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (401, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (403, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (404, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (408, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (410, ErrorKind.HTTP_STATUS, Verdict.GONE),
        (422, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (425, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (429, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (500, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (502, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (503, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (504, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (100, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (199, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (600, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (999, ErrorKind.HTTP_STATUS, Verdict.RETRY),
        (None, ErrorKind.TIMEOUT, Verdict.RETRY),
        (None, ErrorKind.CONNECTION, Verdict.RETRY),
        (None, ErrorKind.DNS, Verdict.RETRY),
        (None, ErrorKind.TLS, Verdict.RETRY),
        (None, ErrorKind.LEASE_EXPIRED, Verdict.RETRY),
        (None, ErrorKind.DESTINATION_BLOCKED, Verdict.DEAD),
        (None, "something_new", Verdict.RETRY),
        (None, None, Verdict.RETRY),
    ],
)
def test_classify(status_code, error_kind, verdict):
    assert classify(status_code=status_code, error_kind=error_kind) is verdict


@pytest.mark.parametrize(
    ("status_code", "permanent", "verdict"),
    [
        (401, frozenset({401}), Verdict.DEAD),
        (401, frozenset({400, 422}), Verdict.RETRY),
        (500, frozenset({500}), Verdict.DEAD),
        (302, frozenset({302}), Verdict.DEAD),
        # 410 always disables; 2xx always succeeds, whatever the list says.
        (410, frozenset({410}), Verdict.GONE),
        (200, frozenset({200}), Verdict.SUCCEEDED),
        (None, frozenset({401}), Verdict.RETRY),
    ],
)
def test_a_permanent_status_is_dead_at_once(status_code, permanent, verdict):
    kind = ErrorKind.HTTP_STATUS if status_code else ErrorKind.TIMEOUT
    assert (
        classify(status_code=status_code, error_kind=kind, permanent=permanent)
        is verdict
    )


def test_error_kinds_are_the_stored_strings():
    assert (
        ErrorKind.TIMEOUT,
        ErrorKind.CONNECTION,
        ErrorKind.DNS,
        ErrorKind.TLS,
        ErrorKind.DESTINATION_BLOCKED,
        ErrorKind.LEASE_EXPIRED,
        ErrorKind.HTTP_STATUS,
    ) == (
        "timeout",
        "connection_error",
        "dns_error",
        "tls_error",
        "destination_blocked",
        "lease_expired",
        "http_status",
    )


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0.0),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("Wed, 02 Dec 2026 14:02:00 GMT", 120.0),
        ("Wed, 02 Dec 2026 16:02:00 +0200", 120.0),
        ("Wed, 02 Dec 2026 14:02:00 -0000", 120.0),
        ("Wed, 02 Dec 2026 13:00:00 GMT", 0.0),  # in the past
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        ("²", None),
        ("Wed, 99 Foo 2026 14:02:00 GMT", None),
        ("0007", 7.0),
        ("0" * 5000 + "9", 9.0),
        ("1" + "0" * 400, 1e9),  # float(int(...)) overflows
        ("9" * 5000, 1e9),  # int() refuses more than 4,300 digits
        ("1" + "0" * 9, 1e9),
        ("x" * 5000, None),
        ("Wed, 02 Dec 2026 14:02:00 GMT" + " " * 200 + "x", None),
        ("Wed, 02 Dec 99999 14:02:00 GMT", None),
        ("\udcff\x00", None),
    ],
)
def test_parse_retry_after(header, seconds):
    assert parse_retry_after(header, now=NOW) == seconds


def delay(*, status_code, header, failed_attempts=1, seed=0):
    return next_delay(
        failed_attempts=failed_attempts,
        status_code=status_code,
        retry_after_header=header,
        base=BASE,
        max_delay=MAX_DELAY,
        rand=random.Random(seed),
        now=NOW,
    )


def jitter(*, failed_attempts=1, seed=0):
    return backoff_seconds(
        failed_attempts=failed_attempts,
        base=BASE,
        max_delay=MAX_DELAY,
        rand=random.Random(seed),
    )


@pytest.mark.parametrize("status_code", [429, 503])
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("120", 120.0),
        ((NOW + timedelta(minutes=5)).strftime("%a, %d %b %Y %H:%M:%S GMT"), 300.0),
        ("86400", MAX_DELAY),
        ("Thu, 01 Jan 2099 00:00:00 GMT", MAX_DELAY),
        ("1" + "0" * 400, MAX_DELAY),
        ("7" * 5000, MAX_DELAY),
    ],
)
def test_retry_after_is_honoured_and_clamped(status_code, header, expected):
    assert delay(status_code=status_code, header=header) == expected


@pytest.mark.parametrize(
    ("status_code", "header"),
    [
        (500, "120"),
        (502, "120"),
        (None, "120"),
        (429, "garbage"),
        (503, None),
    ],
)
def test_backoff_used_when_retry_after_does_not_apply(status_code, header):
    assert delay(status_code=status_code, header=header) == jitter()


@pytest.mark.parametrize(
    ("failed_attempts", "cap"),
    [
        (0, 30.0),
        (1, 60.0),
        (2, 120.0),
        (5, 960.0),
        (6, 1920.0),
        (7, MAX_DELAY),
        (10, MAX_DELAY),
        (5000, MAX_DELAY),
    ],
)
def test_backoff_stays_within_cap_and_spreads_over_it(failed_attempts, cap):
    rand = random.Random(1234)
    draws = [
        backoff_seconds(
            failed_attempts=failed_attempts, base=BASE, max_delay=MAX_DELAY, rand=rand
        )
        for _ in range(2000)
    ]
    assert all(0.0 <= d <= cap for d in draws)
    # Full jitter: the draws cover the range, not just its top or bottom.
    assert min(draws) < cap * 0.05
    assert max(draws) > cap * 0.95


def test_backoff_is_reproducible_with_a_seed():
    assert jitter(failed_attempts=3, seed=42) == jitter(failed_attempts=3, seed=42)


def test_backoff_refuses_negative_attempts():
    with pytest.raises(ValueError):
        jitter(failed_attempts=-1)
