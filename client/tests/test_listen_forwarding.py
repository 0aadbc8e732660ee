"""One webhook forwarded to a local URL, and the line `listen` prints for it."""

from __future__ import annotations

import socket
from datetime import datetime

import pytest

from webhook_relay_client.forwarding import (
    delivery_line,
    event_type,
    forward,
    header,
)

BODY = '{"id":"evt_1","type":"order.created","timestamp":"2026-12-07T22:40:01.000Z","data":{"name":"Zoë"}}'
HEADERS = {
    "Content-Type": "application/json",
    "webhook-id": "evt_1",
    "webhook-timestamp": "1796683201",
    "webhook-signature": "v1,abc=",
    "X-Relay-Attempt": "1",
}
AT = datetime(2026, 12, 7, 23, 40, 1)


@pytest.mark.parametrize(
    ("attempt", "outcome", "ms", "line"),
    [
        (1, "200", 12.4, "2026-12-07 23:40:01  order.created  evt_1  -> 200  12 ms"),
        (
            3,
            "connection refused",
            0.6,
            "2026-12-07 23:40:01  order.created  evt_1 (attempt 3)"
            "  -> connection refused  1 ms",
        ),
    ],
)
def test_a_delivery_is_one_line(attempt, outcome, ms, line):
    assert (
        delivery_line(
            at=AT,
            type="order.created",
            event_id="evt_1",
            attempt=attempt,
            outcome=outcome,
            duration_ms=ms,
        )
        == line
    )


@pytest.mark.parametrize(
    ("body", "found"),
    [(BODY, "order.created"), ("not json", "?"), ("[1]", "?"), ('{"type": 3}', "?")],
)
def test_the_type_comes_from_the_body(body, found):
    assert event_type(body) == found


def test_a_header_is_found_whatever_its_case():
    assert header(HEADERS, "WEBHOOK-ID") == "evt_1"
    assert header(HEADERS, "missing") == ""


def test_the_exact_body_and_every_header_reach_the_local_url(stub):
    stub.answer(204)
    forwarded = forward(
        stub.url + "/webhooks?source=relay",
        HEADERS,
        BODY.encode("utf-8"),
        timeout=5,
    )
    assert forwarded.ok and forwarded.outcome() == "204"
    [sent] = stub.sent
    assert (sent.method, sent.path) == ("POST", "/webhooks?source=relay")
    assert sent.body == BODY.encode("utf-8")
    assert {name: sent.headers[name.lower()] for name in HEADERS} == HEADERS
    assert sent.headers["user-agent"].startswith("webhook-relay-client/")


@pytest.mark.parametrize("status", [200, 299, 300, 302, 404, 500])
def test_only_a_2xx_is_ok(stub, status):
    stub.answer(status, headers={"Location": "http://elsewhere.test/"})
    forwarded = forward(stub.url, HEADERS, b"{}", timeout=5)
    assert forwarded.outcome() == str(status)
    assert forwarded.ok is (200 <= status < 300)
    assert len(stub.sent) == 1  # a redirect is an answer, never followed


def test_a_refused_connection_is_an_error_not_a_status():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections refused
        forwarded = forward(f"http://127.0.0.1:{port}/", HEADERS, b"{}", timeout=5)
    assert (forwarded.status, forwarded.error) == (None, "connection refused")
    assert not forwarded.ok


def test_a_local_url_that_never_answers_times_out(silent_port):
    forwarded = forward(f"http://127.0.0.1:{silent_port}/", HEADERS, b"{}", timeout=0.2)
    assert (forwarded.status, forwarded.error) == (None, "timed out after 0.2 s")
    assert forwarded.duration_ms >= 200
