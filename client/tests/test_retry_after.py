"""Retry-After, read as seconds or as an HTTP-date, and the waits it makes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from webhook_relay_client import RetryPolicy
from webhook_relay_client.transport import retry_after_seconds

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("5", 5.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("99999999999", 99999999999.0),
        ("Sat, 01 Mar 2025 12:00:30 GMT", 30.0),
        ("Sat, 01 Mar 2025 11:59:00 GMT", 0.0),  # already past: no wait
        ("Saturday, 01-Mar-25 12:01:00 GMT", 60.0),  # RFC 850, obsolete but allowed
        ("Sat Mar  1 12:00:10 2025", 10.0),  # asctime
        ("", None),
        ("-1", None),
        ("1.5", None),
        ("²", None),
        ("soon", None),
        ("Sat, 99 Foo 2025 12:00:30 GMT", None),
    ],
)
def test_retry_after_reads_seconds_or_a_date(value, seconds):
    assert retry_after_seconds(value, now=NOW) == seconds


@pytest.mark.parametrize(
    ("retry", "retry_after", "wait"),
    [
        (0, 2.0, 2.0),
        (0, 3600.0, 30.0),  # clamped to max_wait
        (2, 0.0, 0.0),
        (0, None, 0.5),  # no Retry-After: backoff, doubling
        (1, None, 1.0),
        (2, None, 2.0),
        (10, None, 30.0),
    ],
)
def test_waits_honour_retry_after_within_bounds(retry, retry_after, wait):
    assert RetryPolicy(max_wait=30.0, backoff=0.5).wait(retry, retry_after) == wait
