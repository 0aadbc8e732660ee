"""The relay's words for failures and stops, as state tables (deliveries/words.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deliveries import words
from deliveries.models import ErrorKind


def attempt(outcome="dead", status=None, kind="", message=""):
    return SimpleNamespace(
        outcome=outcome, status_code=status, error_kind=kind, error_message=message
    )


@pytest.mark.parametrize(
    ("kind", "message", "status", "said"),
    [
        ("", "", 200, ""),
        (ErrorKind.HTTP_STATUS, "", 401, "HTTP 401 Unauthorized"),
        (ErrorKind.PERMANENT_STATUS, "", 404, "HTTP 404 Not Found"),
        (ErrorKind.HTTP_STATUS, "", 599, "HTTP 599"),
        (
            ErrorKind.CONNECTION,
            "ClientConnectorError: Cannot connect to host 127.0.0.1:9 ssl:default "
            "[Connect call failed ('127.0.0.1', 9)]",
            None,
            "Connection refused",
        ),
        (
            ErrorKind.CONNECTION,
            "Connection refused (127.0.0.1:9)",
            None,
            "Connection refused",
        ),
        (
            ErrorKind.CONNECTION,
            "Could not connect to h:443: Network is unreachable",
            None,
            "Could not connect to h:443: Network is unreachable",
        ),
        (ErrorKind.CONNECTION, "OSError: boom", None, "Could not connect"),
        (
            ErrorKind.TIMEOUT,
            "no complete response head within 10 s",
            None,
            "Timed out: no complete response head within 10 s",
        ),
        (ErrorKind.DNS, "", None, "The host name did not resolve"),
        (
            ErrorKind.LEASE_EXPIRED,
            "lease expired",
            None,
            "The dispatcher sending it stopped before it finished",
        ),
    ],
)
def test_error_words(kind, message, status, said):
    assert (
        words.error_words(error_kind=kind, error_message=message, status_code=status)
        == said
    )


@pytest.mark.parametrize(
    ("last_error", "status", "said"),
    [
        ("http 503", 503, "HTTP 503 Service Unavailable"),
        (
            "connection_error: Connection refused (127.0.0.1:9)",
            None,
            "Connection refused",
        ),
        ("", None, ""),
    ],
)
def test_last_error_words(last_error, status, said):
    assert words.last_error_words(last_error=last_error, status_code=status) == said


@pytest.mark.parametrize(
    ("used", "most", "said"),
    [
        (0, 10, "Retrying (1 of 10)"),
        (2, 10, "Retrying (3 of 10)"),
        (10, 10, "Retrying (10 of 10)"),
    ],
)
def test_attempt_progress(used, most, said):
    assert words.attempt_progress(attempts_used=used, max_attempts=most) == said


@pytest.mark.parametrize(
    ("status", "last", "used", "starts"),
    [
        ("pending", attempt("retry", 500, ErrorKind.HTTP_STATUS), 1, ""),
        ("succeeded", attempt("succeeded", 200), 1, ""),
        (
            "dead",
            attempt("gone", 410, ErrorKind.HTTP_STATUS),
            1,
            "Delivery stopped: the receiver answered 410 Gone",
        ),
        (
            "dead",
            attempt("dead", 401, ErrorKind.PERMANENT_STATUS),
            1,
            "Not retried because the receiver answered HTTP 401 Unauthorized, a "
            "status this endpoint treats as permanent",
        ),
        (
            "dead",
            attempt("dead", None, ErrorKind.DESTINATION_BLOCKED, "private address"),
            1,
            "Not retried because the destination is refused (private address)",
        ),
        (
            "dead",
            attempt("dead", 503, ErrorKind.HTTP_STATUS),
            10,
            "Not retried because all 10 attempts failed (last: HTTP 503 Service "
            "Unavailable), the most it was allowed",
        ),
        (
            "dead",
            attempt(
                "dead", None, ErrorKind.TIMEOUT, "no complete response head within 10 s"
            ),
            1,
            "Not retried because its only attempt failed (last: Timed out",
        ),
    ],
)
def test_stop_reason(status, last, used, starts):
    said = words.stop_reason(status=status, attempts=[last], attempts_used=used)
    assert said.startswith(starts) if starts else said == ""
