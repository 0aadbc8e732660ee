"""`listen` against a hostile or broken relay, and a hostile local server:
what the relay answers is input, so nothing it sends reaches the local
server as framing, crashes the loop, or holds a delivery past its deadline."""

from __future__ import annotations

import pytest
from raw_receiver import RawReceiver, request_parts
from relay_stub import PROBLEM
from test_listen_loop import BODY, HEADERS, SESSION, Lines, message, started

from webhook_relay_client.forwarding import event_type, forward

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
DEEP = 100_000  # levels of [[[...]]]: past any recursion limit json.loads has


@pytest.fixture
def lines() -> Lines:
    return Lines()


def test_the_relay_cannot_choose_the_framing_or_the_host(stub, lines):
    # A body that, were it read as chunked, ends at "0\r\n\r\n" and leaves a
    # second request for the local server to act on.
    smuggled = (
        "0\r\n\r\nPOST /admin/delete-everything HTTP/1.1\r\n"
        "Host: localhost\r\nContent-Length: 0\r\n\r\n"
    )
    hostile = {
        **HEADERS,
        "Transfer-Encoding": "chunked",
        "Host": "internal.admin",
        "Content-Length": "5",
        "Connection": "keep-alive",
        "Cookie": "session=relay-chosen",
    }
    with RawReceiver(OK) as local:
        listening = started(stub, local.url + "/hook", lines)
        stub.answer(
            200, {"items": [{**message(), "headers": hostile, "body": smuggled}]}
        )
        stub.answer(200, {"acked": ["dlv_1"], "rejected": []})
        listening.step()
        line, headers, rest = request_parts(local.all_received())

    assert line == "POST /hook HTTP/1.1"
    assert rest == smuggled.encode()  # one request: all after its head is its body
    assert headers["content-length"] == [str(len(smuggled))]
    assert headers["host"] == [local.url.removeprefix("http://")]
    assert set(headers) == {name.lower() for name in HEADERS} | {
        "host",
        "content-length",
        "user-agent",
        "accept-encoding",
    }
    assert {name: headers[name.lower()] for name in HEADERS} == {
        name: [value] for name, value in HEADERS.items()
    }
    assert stub.sent[-1].path == f"{SESSION}/messages/ack"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"headers": ["not", "a", "dict"]}, "its headers are not a JSON object"),
        ({"headers": {"X-Bad": "a\r\nInjected: 1"}}, "its value holds a control"),
        ({"headers": {"X-Bad": "a\x00b"}}, "its value holds a control character"),
        ({"headers": {"X-Bad": "\u2603"}}, "a character beyond Latin-1"),
        ({"headers": {"Bad Name:": "x"}}, "name 'Bad Name:' is not an HTTP token"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "header 'x-a' is given twice"),
        ({"headers": {"X-A": 1}}, "a header name or value is not a string"),
        ({"body": 123}, "'body' is not a string"),
        ({"attempt": "1"}, "its attempt is not a whole number from 1"),
        ({"lease_expires_at": None}, "'lease_expires_at' is not a string"),
    ],
)
def test_a_malformed_message_is_nacked_on_one_line(
    stub, other_stub, lines, change, why
):
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [{**message(), **change}]})
    stub.answer(200, {"nacked": ["dlv_1"], "rejected": []})
    listening.step()

    assert other_stub.sent == []  # never forwarded
    nack = stub.sent[-1]
    assert (nack.path, nack.json()) == (f"{SESSION}/messages/nack", {"ids": ["dlv_1"]})
    [said] = lines[3:]
    assert said.startswith("2026-12-07 23:40:01  unusable message dlv_1 (")
    assert why in said and said.endswith(")  -> nacked")
    assert (listening.acked, listening.nacked) == (0, 1)


@pytest.mark.parametrize(
    "item",
    [1, "dlv_1", {**message(), "id": ["x"]}, {**message(), "id": ""}, {"id": None}],
    ids=["a number", "a string", "a list id", "an empty id", "no fields"],
)
def test_a_malformed_message_without_an_id_is_skipped(stub, other_stub, lines, item):
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [item]})
    listening.step()

    assert other_stub.sent == [] and len(stub.sent) == 2  # no nack: no id to give
    [said] = lines[3:]
    assert said.startswith("2026-12-07 23:40:01  unusable message without an id (")
    assert said.endswith(
        "  -> skipped; the relay hands it out again when its lease runs out"
    )


def test_a_malformed_message_does_not_cost_the_next_its_delivery(
    stub, other_stub, lines
):
    listening = started(stub, other_stub.url, lines, limit=2)
    stub.answer(200, {"items": [{**message(1), "body": 123}, message(2)]})
    stub.answer(200, {"nacked": ["dlv_1"], "rejected": []})
    stub.answer(200, {"acked": ["dlv_2"], "rejected": []})
    other_stub.answer(204)
    listening.step()

    assert [s.body for s in other_stub.sent] == [BODY.encode()]
    nack, ack = stub.sent[-2:]
    assert (nack.path, nack.json()) == (f"{SESSION}/messages/nack", {"ids": ["dlv_1"]})
    assert (ack.path, ack.json()) == (f"{SESSION}/messages/ack", {"ids": ["dlv_2"]})
    assert (listening.acked, listening.nacked) == (1, 1)


def test_an_answer_nested_too_deeply_is_waited_out(stub, lines):
    listening = started(stub, "http://localhost:3000/", lines)
    deep = b"[" * DEEP + b"]" * DEEP
    stub.answer(200, raw=deep, headers={"Content-Type": "application/json"})
    stub.answer(502, raw=b'{"a":' * DEEP, headers={"Content-Type": PROBLEM})
    stub.answer(200, {"items": []})
    for _ in range(3):
        listening.step()

    assert listening.stopping.waited == [1.0, 2.0, 0.25]  # backed off, went on
    assert lines[3:] == [
        "The relay's answer could not be read (200 with JSON nested too deeply "
        "to read); trying again until it can.",
        "The relay answers again.",
    ]


def test_a_body_nested_too_deeply_has_no_type_and_is_still_forwarded(
    stub, other_stub, lines
):
    body = "[" * DEEP + "]" * DEEP
    assert event_type(body) == "?"
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [{**message(), "body": body}]})
    stub.answer(200, {"acked": ["dlv_1"], "rejected": []})
    other_stub.answer(204)
    listening.step()
    assert other_stub.sent[0].body == body.encode()
    assert "  ?  evt_1  -> 204  " in lines[-1]


def test_an_unreadable_ack_answer_is_said_and_not_sent_again(stub, other_stub, lines):
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [message()]})
    stub.answer(200, {"acked": "dlv_1", "rejected": 0})
    other_stub.answer(204)
    listening.step()
    assert [s.path for s in stub.sent[1:]] == [
        f"{SESSION}/messages?limit=1",
        f"{SESSION}/messages/ack",
    ]
    assert lines[-1] == (
        "  the relay's answer to the ack of dlv_1 could not be read (unexpected "
        "answer: 'acked' is not a list of strings); if the ack was not taken, the "
        "relay hands the message out again when its lease runs out"
    )


def test_one_deadline_bounds_the_whole_local_exchange(stub, lines):
    # Each byte comes well within the timeout; all of them take 3 s.
    dripped = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 40 + b"\r\n\r\n"
    with RawReceiver(drip=dripped, drip_every=0.05) as local:
        listening = started(stub, local.url, lines, forward_timeout=0.5)
        stub.answer(200, {"items": [message()]})
        stub.answer(200, {"nacked": ["dlv_1"], "rejected": []})
        listening.step()
        local.all_received()

    assert stub.sent[-1].path == f"{SESSION}/messages/nack"
    said = lines[-1]
    assert "  evt_1  -> timed out after 0.5 s  " in said
    took_ms = float(said.rsplit("  ", 1)[1].removesuffix(" ms"))
    assert 500 <= took_ms < 1500


def test_a_header_that_cannot_be_sent_is_never_sent(silent_port):
    # forward() is public: it checks what it sends, whoever built the headers.
    # Had it connected, the port (which never answers) would time it out.
    forwarded = forward(
        f"http://127.0.0.1:{silent_port}/",
        {"webhook-id": "a\r\nX-Injected: 1"},
        b"{}",
        timeout=0.2,
    )
    assert (forwarded.status, forwarded.ok) == (None, False)
    assert forwarded.error == (
        "not sent: header 'webhook-id': its value holds a control character"
    )
