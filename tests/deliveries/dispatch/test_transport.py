"""The AsyncSender against real loopback servers: one POST in, one SendResult out."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime

import pytest

from deliveries.dispatch.transport import AsyncSender, OutgoingRequest
from deliveries.retry import parse_retry_after
from tests.support.fakes import BlockingSender, Receiver, Reply
from tests.support.hostile import (
    CASES,
    GZIP_BOMB,
    HTTP_STATUS,
    HostileReceiver,
    head,
    reply,
)

TIMEOUT = 0.6
MARGIN = 0.5  # scheduling on a busy 2-core machine; far below any trickle's length
LIMIT = 64


def send_all(urls: list[str], headers: dict[str, str] | None = None, **options):
    """Send to each url in turn on one AsyncSender, closed at the end."""
    options = {"timeout": 5, "body_limit": LIMIT, "allow_private": True, **options}
    headers = {"X-A": "1"} if headers is None else headers

    async def go():
        sender = AsyncSender(**options)
        try:
            return [
                await sender.send(OutgoingRequest(url=u, headers=headers, body=b"{}"))
                for u in urls
            ]
        finally:
            await sender.close()

    return asyncio.run(go())


def send(url: str, **options):
    return send_all([url], **options)[0]


@pytest.fixture
def hostile():
    with HostileReceiver() as rx:
        yield rx


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_hostile_receiver_ends_in_a_classified_result_within_the_timeout(
    hostile, case
):
    started = time.monotonic()
    result, after = send_all(
        [hostile.url(case.name), hostile.url("ok")], timeout=TIMEOUT
    )
    took = time.monotonic() - started

    assert result.status_code == case.status
    assert result.error_kind == (
        "" if case.error_kind == HTTP_STATUS else case.error_kind
    )
    assert result.duration_ms <= (TIMEOUT + MARGIN) * 1000
    assert len(result.body_excerpt) <= LIMIT
    # The same sender carries on: the next request on it is answered normally.
    assert (after.status_code, after.body_excerpt) == (200, "ok")
    assert took <= 2 * TIMEOUT + MARGIN


@pytest.mark.parametrize(
    "case_name", ["trickled-status-line", "trickled-headers", "trickled-body"]
)
def test_a_trickle_is_cut_at_the_deadline_not_before(hostile, case_name):
    result = send(hostile.url(case_name), timeout=TIMEOUT)
    assert result.error_kind == "timeout"
    assert TIMEOUT * 1000 <= result.duration_ms <= (TIMEOUT + MARGIN) * 1000


def test_a_trickled_body_names_the_status_that_came_first(hostile):
    result = send(hostile.url("trickled-body"), timeout=TIMEOUT)
    assert "status 200, but the body did not arrive" in result.error_message


@pytest.mark.parametrize(
    ("case_name", "seconds"),
    [
        ("retry-after-400-digits", 3600.0),
        ("retry-after-5000-digits", 3600.0),
        ("retry-after-garbage", None),
    ],
)
def test_any_retry_after_comes_back_raw_and_parses_without_raising(
    hostile, case_name, seconds
):
    result = send(hostile.url(case_name))
    assert result.retry_after
    parsed = parse_retry_after(result.retry_after, now=datetime.now(UTC))
    assert (min(parsed, 3600.0) if parsed is not None else None) == seconds


def test_a_head_that_cannot_be_parsed_says_so_without_a_made_up_status(hostile):
    result = send(hostile.url("ten-thousand-headers"))
    assert result.error_message == (
        "the response could not be parsed: Too many headers received"
    )


def test_a_body_with_nul_and_invalid_utf8_comes_back_as_text(hostile):
    result = send(hostile.url("nul-body"))
    assert result.body_excerpt.startswith("before\x00\x00after \ufffd")


def test_a_gzip_bomb_is_kept_raw_up_to_the_limit_never_inflated(hostile):
    result = send(hostile.url("gzip-bomb"), body_limit=4096)
    assert result.status_code == 200
    raw = GZIP_BOMB[:4096].decode("utf-8", errors="replace")
    assert result.body_excerpt == raw  # the compressed bytes, not the zeros
    assert hostile.headers[0]["Accept-Encoding"] == "identity"


def test_the_request_carries_the_contract_headers_and_exact_body(hostile):
    body = b'{"id": "evt_1", "data": {"\xc3\xa9": 1}}'

    async def go():
        sender = AsyncSender(timeout=5, body_limit=LIMIT, allow_private=True)
        try:
            return await sender.send(
                OutgoingRequest(
                    url=hostile.url("ok"),
                    headers={"Content-Type": "application/json", "webhook-id": "e1"},
                    body=body,
                )
            )
        finally:
            await sender.close()

    assert asyncio.run(go()).status_code == 200
    sent = hostile.headers[0]
    assert sent["User-Agent"] == "webhook-relay/1.0"
    assert sent["Content-Type"] == "application/json"
    assert sent["webhook-id"] == "e1"
    assert sent["Content-Length"] == str(len(body))


def test_connections_are_kept_alive_between_sends(hostile):
    results = send_all([hostile.url("ok")] * 3)
    assert [r.status_code for r in results] == [200, 200, 200]
    assert hostile.connections == 1


def test_a_slow_connect_is_a_timeout():
    # A listener whose accept queue is full: the kernel drops further SYNs,
    # so connect() neither succeeds nor fails until the client gives up.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)  # let the kernel complete the fillers' handshakes
        result = send(f"http://127.0.0.1:{port}/hook", timeout=TIMEOUT)
    finally:
        for s in [*fillers, listener]:
            s.close()
    assert (result.status_code, result.error_kind) == (None, "timeout")
    assert result.duration_ms <= (TIMEOUT + MARGIN) * 1000


def test_a_tls_handshake_that_never_completes_is_a_timeout():
    # The kernel completes the TCP handshake for a listener's backlog; nothing
    # ever accepts, so the client's TLS hello goes unanswered.
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        port = listener.getsockname()[1]
        result = send(f"https://127.0.0.1:{port}/hook", timeout=TIMEOUT)
    assert (result.status_code, result.error_kind) == (None, "timeout")
    assert result.duration_ms <= (TIMEOUT + MARGIN) * 1000


def in_flight_at_once(count: int, **options) -> list:
    """count sends on one sender to a receiver that answers none of them
    until all count have arrived: they complete only if all are in flight."""
    arrived = 0
    first_at: float | None = None
    all_here = asyncio.Event()
    # Only arrivals close together count as "at once": a second wave that
    # connects after the first timed out (limit reached) must not release it.
    window = options.get("timeout", 5) / 2

    async def barrier(writer) -> None:
        nonlocal arrived, first_at
        now = asyncio.get_running_loop().time()
        first_at = now if first_at is None else first_at
        arrived += 1
        if arrived == count and now - first_at <= window:
            all_here.set()
        await all_here.wait()
        await reply(head("200 OK", length=0))(writer)

    with HostileReceiver() as rx:
        rx.behaviours["barrier"] = barrier
        url = rx.url("barrier")

        async def go():
            options.setdefault("timeout", 5)
            sender = AsyncSender(body_limit=LIMIT, allow_private=True, **options)
            request = OutgoingRequest(url=url, headers={}, body=b"{}")
            try:
                return await asyncio.gather(
                    *(sender.send(request) for _ in range(count))
                )
            finally:
                await sender.close()

        return asyncio.run(go())


def test_hundreds_of_sends_are_in_flight_at_once_on_one_sender():
    results = in_flight_at_once(300)
    assert {r.status_code for r in results} == {200}


def test_the_connection_limit_caps_sends_in_flight():
    results = in_flight_at_once(20, limit=10, timeout=TIMEOUT)
    assert {r.error_kind for r in results} == {"timeout"}


def test_a_redirect_is_returned_not_followed():
    with Receiver(
        lambda r: Reply(status=302, headers={"Location": "/elsewhere"})
    ) as rx:
        result = send(rx.url)
        assert result.status_code == 302
        assert [r.path for r in rx.received] == ["/hook"]


def test_a_slow_receiver_is_a_timeout():
    with Receiver(lambda r: Reply(delay=1.0)) as rx:
        result = send(rx.url, timeout=0.2)
    assert (result.status_code, result.error_kind) == (None, "timeout")


def test_a_closed_port_is_a_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = send(f"http://127.0.0.1:{port}/hook")
    assert (result.status_code, result.error_kind) == (None, "connection_error")


def test_retry_after_and_a_truncated_body_come_back():
    with Receiver(
        lambda r: Reply(status=503, body=b"y" * 1000, headers={"Retry-After": "7"})
    ) as rx:
        result = send(rx.url)
    assert (result.status_code, result.retry_after, len(result.body_excerpt)) == (
        503,
        "7",
        LIMIT,
    )


def test_a_body_cut_at_the_limit_leaves_the_sender_working(hostile):
    hostile.behaviours["long"] = reply(head("200 OK", length=100_000) + b"z" * 100_000)
    long, after = send_all([hostile.url("long"), hostile.url("ok")])
    assert (long.status_code, long.body_excerpt) == (200, "z" * LIMIT)
    assert after.status_code == 200


def test_the_blocking_sender_sends_from_threads_on_one_loop():
    with Receiver() as rx:
        sender = BlockingSender(timeout=5, body_limit=LIMIT, allow_private=True)
        try:
            result = sender.send(OutgoingRequest(url=rx.url, headers={}, body=b"{}"))
        finally:
            sender.close()
    assert result.status_code == 200
