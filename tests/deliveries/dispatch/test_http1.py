"""The sender's own HTTP/1.1 client (deliveries/dispatch/http1.py) against a real
loopback server: framings a receiver may choose, limits it may break, and a pool
that never reuses a connection it cannot trust. The hostile cases every sender
must survive are in test_transport.py."""

from __future__ import annotations

import asyncio

import pytest

from deliveries.dispatch import http1, pool
from deliveries.dispatch.transport import frame, target_of
from tests.deliveries.dispatch.test_transport import LIMIT, send_all
from tests.support.hostile import HostileReceiver, head, reply


@pytest.fixture
def rx():
    with HostileReceiver() as receiver:
        yield receiver


def test_a_chunked_body_is_read_whole_and_the_connection_kept(rx):
    rx.behaviours["chunked"] = reply(
        head("200 OK", "Transfer-Encoding: chunked")
        + b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    chunked, after = send_all([rx.url("chunked"), rx.url("ok")])
    assert (chunked.status_code, chunked.body_excerpt) == (200, "abcde")
    assert after.status_code == 200
    assert rx.connections == 1


def test_a_body_ended_by_the_close_is_complete_and_the_next_send_reconnects(rx):
    async def until_close(writer) -> None:
        writer.write(head("202 Accepted", "Connection: close") + b"until the end")
        await writer.drain()
        writer.close()

    rx.behaviours["until-close"] = until_close
    result, after = send_all([rx.url("until-close"), rx.url("ok")])
    assert (result.status_code, result.error_kind) == (202, "")
    assert result.body_excerpt == "until the end"
    assert after.status_code == 200
    assert rx.connections == 2


def test_an_informational_answer_is_skipped_for_the_final_one(rx):
    rx.behaviours["continue"] = reply(
        b"HTTP/1.1 100 Continue\r\n\r\n" + head("201 Created", length=2) + b"ok"
    )
    (result,) = send_all([rx.url("continue")])
    assert (result.status_code, result.body_excerpt) == (201, "ok")


def test_a_head_over_its_size_limit_is_refused_even_with_short_lines(rx):
    # 100 headers of 1,000 bytes: under the count and line limits, over the head's.
    many = [f"X-Filler-{n}: {'f' * 1000}" for n in range(100)]
    rx.behaviours["big-head"] = reply(head("200 OK", *many, length=0))
    result, after = send_all([rx.url("big-head"), rx.url("ok")])
    assert (result.status_code, result.error_kind) == (None, "invalid_response")
    assert result.error_message == (
        f"the response could not be parsed: the head is over "
        f"{http1.MAX_HEAD_BYTES} bytes"
    )
    assert after.status_code == 200


def test_a_status_line_over_the_line_limit_is_refused(rx):
    rx.behaviours["long-status"] = reply(head("200 " + "K" * 9000, length=0))
    (result,) = send_all([rx.url("long-status")])
    assert (result.status_code, result.error_kind) == (None, "invalid_response")
    assert "status line is over 8190 bytes" in result.error_message


def test_bytes_sent_out_of_turn_retire_the_connection(rx):
    # A second answer nobody asked for: the next request must not read it as its own.
    rx.behaviours["twice"] = reply(
        head("200 OK", length=5) + b"first" + head("500 Boom", length=5) + b"stale"
    )
    first, after = send_all([rx.url("twice"), rx.url("ok")])
    assert (first.status_code, first.body_excerpt) == (200, "first")
    assert (after.status_code, after.body_excerpt) == (200, "ok")
    assert rx.connections == 2


def test_the_request_is_framed_with_host_headers_in_order_and_length(rx):
    send_all([rx.url("ok")], {"X-First": "1", "X-Second": "2"})
    sent = rx.headers[0]
    assert list(sent) == [
        "Host",
        "X-First",
        "X-Second",
        "User-Agent",
        "Accept-Encoding",
        "Content-Length",
    ]
    assert sent["Host"] == f"127.0.0.1:{rx.port}"


def test_a_header_with_a_line_break_is_never_sent(rx):
    (result,) = send_all([rx.url("ok")], {"X-Evil": "a\r\nX-Injected: 1"})
    assert (result.status_code, result.error_kind) == (None, "connection_error")
    assert "line break" in result.error_message
    assert rx.received == []


def test_idle_connections_are_closed_after_the_keepalive(rx):
    async def go():
        connections_pool = _pool(limit=4, keepalive=0.2)
        target = target_of(rx.url("ok"))
        request = frame(target, {}, b"{}")
        await connections_pool.post(target, request, http1.Exchange())
        kept = [c for idle in connections_pool._idle.values() for c in idle]
        await asyncio.sleep(0.5)  # the sweep runs after the keep-alive
        left = [c for idle in connections_pool._idle.values() for c in idle]
        connections_pool.close()
        return kept, left

    kept, left = asyncio.run(go())
    assert len(kept) == 1 and kept[0].closed
    assert left == []


async def _literal(host: str) -> list[str]:
    return [host]


def _pool(*, limit: int, keepalive: float) -> pool.Pool:
    """A pool that dials a URL's literal address as it is."""
    return pool.Pool(
        limit=limit,
        keepalive=keepalive,
        body_limit=LIMIT,
        addresses=lambda host, port, tenant: _literal(host),
        ssl_context=None,
    )


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF line ends
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",  # space before colon
        b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",  # folded
    ],
    ids=["bare-lf", "space-before-colon", "folded-header"],
)
def test_a_sloppy_but_clear_answer_is_read_as_its_status(rx, answer):
    # As aiohttp's client read them: a receiver that took the delivery is not
    # retried, nor its breaker moved, for its framing.
    rx.behaviours["sloppy"] = reply(answer)
    (result,) = send_all([rx.url("sloppy")])
    assert (result.status_code, result.error_kind, result.body_excerpt) == (
        200,
        "",
        "ok",
    )


def test_no_more_connections_are_kept_idle_than_the_limit():
    # Three receivers, one after another, on a pool of two: the third
    # connection is closed once answered, not kept as a third idle socket.
    async def go(urls):
        connections_pool = _pool(limit=2, keepalive=30)
        connections = []
        for url in urls:
            exchange = http1.Exchange()
            target = target_of(url)
            await connections_pool.post(target, frame(target, {}, b"{}"), exchange)
            connections.append(exchange.connection)
        await asyncio.sleep(0.05)  # let the aborted socket report its close
        idle = [c for kept in connections_pool._idle.values() for c in kept]
        closed = [connection.closed for connection in connections]
        connections_pool.close()
        return connections, idle, closed

    with HostileReceiver() as a, HostileReceiver() as b, HostileReceiver() as c:
        connections, idle, closed = asyncio.run(go([a.url(), b.url(), c.url()]))
    assert idle == connections[:2]
    assert closed == [False, False, True]


def test_a_full_excerpt_is_answered_without_waiting_for_the_rest(rx):
    # Exactly the limit arrives, then the receiver stalls: the excerpt is all
    # that is kept, so the attempt ends now, not at the deadline.
    rx.behaviours["stall"] = reply(head("200 OK", length=10_000) + b"z" * LIMIT)
    (result,) = send_all([rx.url("stall")], timeout=2)
    assert (result.status_code, result.body_excerpt) == (200, "z" * LIMIT)
    assert result.duration_ms < 1000


def test_trailers_that_never_end_are_cut_not_read_to_the_deadline(rx):
    async def endless_trailer(writer) -> None:
        writer.write(head("200 OK", "Transfer-Encoding: chunked") + b"2\r\nok\r\n0\r\n")
        writer.write(b"X-Trailer: " + b"t" * 200_000)
        await writer.drain()
        await asyncio.sleep(10)  # and never ends the line

    rx.behaviours["trailer"] = endless_trailer
    (result,) = send_all([rx.url("trailer")], timeout=3)
    assert (result.status_code, result.error_kind) == (None, "invalid_response")
    assert "trailers are too long" in result.error_message
    assert result.duration_ms < 2000


def test_an_informational_answer_with_a_body_is_refused(rx):
    rx.behaviours["1xx-body"] = reply(
        b"HTTP/1.1 150 Odd\r\nContent-Length: 5\r\n\r\nhello"
        + head("200 OK", length=2)
        + b"ok"
    )
    (result,) = send_all([rx.url("1xx-body")])
    assert (result.status_code, result.error_kind) == (None, "invalid_response")


def test_a_stream_of_informational_answers_counts_as_one_head(rx):
    rx.behaviours["1xx-flood"] = reply(b"HTTP/1.1 100 Continue\r\n\r\n" * 5000)
    (result,) = send_all([rx.url("1xx-flood")], timeout=3)
    assert (result.status_code, result.error_kind) == (None, "invalid_response")
    assert "head is over" in result.error_message


def test_an_idle_connection_the_receiver_closes_leaves_the_pool_at_once(rx):
    async def go():
        connections_pool = _pool(limit=4, keepalive=30)
        target = target_of(rx.url("close-later"))
        await connections_pool.post(target, frame(target, {}, b"{}"), http1.Exchange())
        before = connections_pool._idle_count
        await asyncio.sleep(0.3)  # the receiver closes 0.1 s after answering
        after = connections_pool._idle_count
        connections_pool.close()
        return before, after

    async def close_later(writer) -> None:
        writer.write(head("200 OK", length=2) + b"ok")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()

    rx.behaviours["close-later"] = close_later
    assert asyncio.run(go()) == (1, 0)


def test_framing_headers_from_an_old_row_never_double_the_framing(rx):
    send_all([rx.url("ok")], {"host": "elsewhere.example", "Content-Length": "999"})
    assert rx.received == ["/ok"]
    assert rx.headers[0]["Host"] == f"127.0.0.1:{rx.port}"
    assert rx.headers[0]["Content-Length"] == "2"
    assert "host" not in rx.headers[0]
