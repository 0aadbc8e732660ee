"""How the sender's HTTP/1.1 client frames an answer's body (RFC 9112 6.1, 6.3)
and which status lines it takes, against a real loopback receiver that writes
the exact bytes: chunked only when it is the final transfer coding, otherwise
the body runs to the close; framing a sender must not produce is read as
Transfer-Encoding says and the connection is not used again; a status outside
100-599 is not an answer."""

from __future__ import annotations

import asyncio

import httptools
import pytest

from deliveries.dispatch import http1
from tests.deliveries.dispatch.test_transport import LIMIT, send_all
from tests.support.hostile import HostileReceiver, close_after, head, reply

CHUNKED_HELLO = b"5\r\nhello\r\n0\r\n\r\n"


@pytest.fixture
def rx():
    with HostileReceiver() as receiver:
        yield receiver


@pytest.mark.parametrize("status", ["200 OK", "503 Busy"])
@pytest.mark.parametrize(
    "codings",
    [
        ["Transfer-Encoding: chunked, gzip"],
        ["Transfer-Encoding: gzip"],
        ["Transfer-Encoding: chunked", "Transfer-Encoding: identity"],
        ["Transfer-Encoding: chunked,"],  # llhttp's reading: the last coding is ""
    ],
    ids=["chunked-then-gzip", "gzip", "chunked-then-identity", "chunked-comma"],
)
def test_a_body_whose_final_coding_is_not_chunked_runs_to_the_close(
    rx, status, codings
):
    # The receiver's answer, not a connection error: a 200 here is a success,
    # and is not retried into a duplicate.
    rx.behaviours["te"] = close_after(head(status, *codings) + CHUNKED_HELLO)
    result, after = send_all([rx.url("te"), rx.url("ok")])
    assert (result.status_code, result.error_kind) == (int(status[:3]), "")
    assert result.body_excerpt == CHUNKED_HELLO.decode()  # kept raw, never decoded
    assert (after.status_code, rx.connections) == (200, 2)


def test_a_close_delimited_body_is_cut_at_the_limit_without_waiting_for_the_close(
    rx,
):
    async def endless(writer) -> None:
        writer.write(head("200 OK", "Transfer-Encoding: gzip") + b"g" * (LIMIT + 10))
        await writer.drain()
        await asyncio.sleep(10)  # and never closes

    rx.behaviours["endless"] = endless
    (result,) = send_all([rx.url("endless")], timeout=3)
    assert (result.status_code, result.error_kind) == (200, "")
    assert result.body_excerpt == "g" * LIMIT
    assert result.duration_ms < 2000


def test_a_close_delimited_body_that_never_ends_is_a_timeout_naming_the_status(rx):
    async def stalls(writer) -> None:
        writer.write(head("200 OK", "Transfer-Encoding: chunked, gzip") + b"gz")
        await writer.drain()
        await asyncio.sleep(10)

    rx.behaviours["stalls"] = stalls
    (result,) = send_all([rx.url("stalls")], timeout=0.5)
    assert (result.status_code, result.error_kind) == (None, "timeout")
    assert result.error_message.startswith("status 200, but the body did not arrive")


def test_chunked_applied_twice_is_read_once_and_the_connection_retired(rx):
    rx.behaviours["twice"] = reply(
        head("200 OK", "Transfer-Encoding: chunked, chunked") + CHUNKED_HELLO
    )
    result, after = send_all([rx.url("twice"), rx.url("ok")])
    assert (result.status_code, result.error_kind, result.body_excerpt) == (
        200,
        "",
        "hello",
    )
    assert (after.status_code, rx.connections) == (200, 2)


@pytest.mark.parametrize(
    ("headers", "body", "excerpt"),
    [
        (["Transfer-Encoding: chunked", "Content-Length: 100"], CHUNKED_HELLO, "hello"),
        (["Content-Length: 3", "Transfer-Encoding: chunked"], CHUNKED_HELLO, "hello"),
    ],
    ids=["chunked-with-length", "length-then-chunked"],
)
def test_transfer_encoding_wins_over_content_length_and_the_connection_is_retired(
    rx, headers, body, excerpt
):
    rx.behaviours["both"] = reply(head("200 OK", *headers) + body)
    result, after = send_all([rx.url("both"), rx.url("ok")])
    assert (result.status_code, result.error_kind, result.body_excerpt) == (
        200,
        "",
        excerpt,
    )
    assert (after.status_code, rx.connections) == (200, 2)


def test_a_non_chunked_coding_with_a_length_still_runs_to_the_close(rx):
    rx.behaviours["gzip-length"] = close_after(
        head("200 OK", "Transfer-Encoding: gzip", "Content-Length: 2") + b"gzipped"
    )
    result, after = send_all([rx.url("gzip-length"), rx.url("ok")])
    assert (result.status_code, result.body_excerpt) == (200, "gzipped")
    assert (after.status_code, rx.connections) == (200, 2)


def test_an_http10_answer_with_transfer_encoding_is_not_reused(rx):
    rx.behaviours["old"] = reply(
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + CHUNKED_HELLO
    )
    result, after = send_all([rx.url("old"), rx.url("ok")])
    assert (result.status_code, result.body_excerpt) == (200, "hello")
    assert (after.status_code, rx.connections) == (200, 2)


@pytest.mark.parametrize("code", ["000", "099", "600", "999"])
def test_a_status_outside_100_to_599_is_an_invalid_response(rx, code):
    rx.behaviours["odd"] = reply(head(f"{code} Odd", length=2) + b"ok")
    result, after = send_all([rx.url("odd"), rx.url("ok")])
    assert (result.status_code, result.error_kind) == (None, "invalid_response")
    assert result.error_message == (
        f"the response could not be parsed: the status code {code} is outside 100-599"
    )
    assert after.status_code == 200


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"HTTP/1.1 100 Continue\r\n\r\n" + head("200 OK", length=0), 200),
        (head("599 Edge", length=0), 599),
    ],
    ids=["100-then-200", "599"],
)
def test_the_edges_of_the_status_range_are_answers(rx, data, status):
    rx.behaviours["edge"] = reply(data)
    (result,) = send_all([rx.url("edge")])
    assert (result.status_code, result.error_kind) == (status, "")


TE_VALUES = [
    [b"chunked"],
    [b"Chunked"],
    [b"chunked "],
    [b"chunked\t"],
    [b"chunked,"],
    [b"chunked ,"],
    [b"chunked, , "],
    [b"chunked, gzip"],
    [b"chunked , gzip"],
    [b"gzip, chunked"],
    [b"gzip,chunked"],
    [b"gzip ,chunked"],
    [b"gzip,\tchunked"],
    [b",chunked"],
    [b"gzip;q=1, chunked"],
    [b"chunked;x=1"],
    [b"xchunked"],
    [b"chunkedx"],
    [b"gzip chunked"],
    [b"identity"],
    [b"chunked", b"gzip"],
    [b"gzip", b"chunked"],
    [b"gzip, chunked", b"chunked"],
]


@pytest.mark.parametrize("values", TE_VALUES, ids=repr)
def test_the_framing_read_from_the_headers_is_the_parsers_own(values):
    # connection_lost decides from the headers whether a close ends the body;
    # it must agree with how httptools (llhttp) actually frames that body, or
    # a cut chunked body would pass for a complete one.
    class Seen:
        body = b""

        def on_body(self, piece: bytes) -> None:
            self.body += piece

    seen = Seen()
    parser = httptools.HttpResponseParser(seen)
    parser.set_dangerous_leniencies(**http1.LENIENCIES)
    fields = b"".join(b"Transfer-Encoding: %s\r\n" % value for value in values)
    parser.feed_data(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n" + CHUNKED_HELLO)
    parser_chunked = seen.body == b"hello"
    assert http1.chunked_is_final(values) == parser_chunked
