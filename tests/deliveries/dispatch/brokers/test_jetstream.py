"""The NATS JetStream sender against the shared NATS server on loopback
(127.0.0.1:4222), through KindSender as the dispatcher sends; a broker that
goes away is played by a TcpProxy, one that hangs by a loopback socket."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest
from nats.js.api import DiscardPolicy
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.brokers.jetstream import Sender
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support.jetstream import (
    SECRET,
    SHARED_PORT,
    GreetingServer,
    NoHttp,
    a_request,
    fetch_all,
    jetstream,
    open_connections,
    send,
    stream_on,
)


@pytest.fixture
def stream():
    name, prefix = stream_on(SHARED_PORT)
    yield name, prefix
    jetstream(SHARED_PORT, lambda js: js.delete_stream(name))


def test_a_consumer_receives_the_event_and_verifies_its_signature(stream):
    name, prefix = stream
    request = a_request(SHARED_PORT, f"{prefix}.orders")

    [result] = send(request)

    assert result.acknowledged, result.error_message
    assert result.body_excerpt == f"JetStream PubAck: stream '{name}', sequence 1"
    [received] = fetch_all(name, f"{prefix}.orders")
    assert received.data == request.body
    headers = dict(received.headers)
    assert {k: headers[k] for k in request.headers} == request.headers
    assert headers["Nats-Msg-Id"] == request.headers["X-Relay-Delivery-Id"]
    assert Webhook(SECRET).verify(received.data, headers) == {"data": {"card": "4242"}}


def test_one_event_to_two_endpoints_on_one_stream_is_stored_twice(stream):
    # Two deliveries of one event (one webhook-id) are two messages: the
    # stream's duplicate check must not drop the second endpoint's.
    name, prefix = stream
    first = a_request(SHARED_PORT, f"{prefix}.a", event_id="evt_1", delivery_id="dlv_a")
    second = a_request(
        SHARED_PORT, f"{prefix}.b", event_id="evt_1", delivery_id="dlv_b"
    )

    results = send(first, second)

    assert [r.acknowledged for r in results] == [True, True]
    assert "duplicate" not in results[1].body_excerpt
    assert len(fetch_all(name, f"{prefix}.>")) == 2


def test_a_resend_of_the_same_event_is_stored_once(stream):
    name, prefix = stream
    request = a_request(SHARED_PORT, f"{prefix}.orders")

    first, again = send(request, request)

    assert first.body_excerpt == f"JetStream PubAck: stream '{name}', sequence 1"
    assert again.acknowledged
    assert again.body_excerpt.endswith("sequence 1, duplicate: already stored")
    assert len(fetch_all(name, f"{prefix}.orders")) == 1


def test_a_subject_no_stream_takes_is_refused():
    subject = f"relay-test-nowhere.{uuid.uuid4().hex}"

    [result] = send(a_request(SHARED_PORT, subject))

    assert (result.acknowledged, result.error_kind) == (False, "broker_refused")
    assert result.error_message == f"no JetStream stream takes subject '{subject}'"


def test_a_stream_refusing_the_message_is_broker_refused():
    name, prefix = stream_on(SHARED_PORT, max_msgs=1, discard=DiscardPolicy.NEW)
    try:
        first, refused = send(
            a_request(SHARED_PORT, f"{prefix}.a", event_id="evt_1", delivery_id="d1"),
            a_request(SHARED_PORT, f"{prefix}.a", event_id="evt_2", delivery_id="d2"),
        )
    finally:
        jetstream(SHARED_PORT, lambda js: js.delete_stream(name))

    assert first.acknowledged
    assert (refused.acknowledged, refused.error_kind) == (False, "broker_refused")
    assert refused.error_message.startswith(
        "JetStream refused the message: maximum messages exceeded"
    )


def test_a_broker_gone_fails_the_attempt_and_the_next_one_dials_again(stream):
    _, prefix = stream
    with TcpProxy(("127.0.0.1", SHARED_PORT)) as proxy:
        request = a_request(proxy.port, f"{prefix}.a")
        steps = {0: proxy.cut, 1: proxy.resume}

        before, gone, back = send(
            request,
            request,
            request,
            between=lambda i: steps[i]() if i in steps else None,
        )

    assert before.acknowledged
    assert (gone.acknowledged, gone.error_kind) == (False, "connection_error")
    assert back.acknowledged, back.error_message
    assert proxy.accepted == 2  # the dead connection was dropped, a new one dialled


def test_a_refused_connection_is_a_connection_error_at_once():
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    started = time.monotonic()

    [result] = send(a_request(port, "relay.a"), timeout=3.0)

    assert (result.acknowledged, result.error_kind) == (False, "connection_error")
    assert result.error_message.endswith("connection refused")
    assert time.monotonic() - started < 3.0  # nats-py's retry loop is off


def test_a_broker_that_never_answers_times_out_and_leaves_nothing_open():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never greets
        port = silent.getsockname()[1]
        started = time.monotonic()

        [result] = send(a_request(port, "relay.a"), timeout=1.0)

        took = time.monotonic() - started
        still_open = open_connections(port)
    assert (result.acknowledged, result.error_kind) == (False, "timeout")
    assert took < 1.0 + 1.0
    assert still_open == 0


def test_a_broker_that_stops_answering_after_connecting_is_dropped():
    with GreetingServer() as server:  # greets and answers PING, never a PubAck
        [result] = send(a_request(server.port, "relay.a"), timeout=1.0)
        still_open = open_connections(server.port)

    assert (result.acknowledged, result.error_kind) == (False, "timeout")
    assert server.published.is_set()
    assert still_open == 0


def test_a_send_cancelled_while_waiting_for_its_puback_leaves_nothing_open():
    with GreetingServer() as server:

        async def cancelled_send():
            sender = KindSender(http=NoHttp(), timeout=3.0, allow_private=False)
            request = a_request(server.port, "relay.a")
            sending = asyncio.ensure_future(sender.send(request))
            try:
                # The dispatcher stopping mid-send, with the PUB on the wire.
                assert await asyncio.to_thread(server.published.wait, 3.0)
                sending.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await sending
                return open_connections(server.port)
            finally:
                await sender.close()

        assert asyncio.run(cancelled_send()) == 0


def test_the_pool_keeps_at_most_its_limit_of_connections(stream):
    _, prefix = stream
    # Tokens make three pool keys; the shared server has no auth and ignores them.
    requests = [
        a_request(SHARED_PORT, f"{prefix}.a", credentials=f"token-{n}")
        for n in range(3)
    ]
    counts = []

    results = send(
        *requests,
        requests[2],
        senders={"nats": Sender(limit=2)},
        between=lambda i: counts.append(open_connections(SHARED_PORT)),
    )

    assert all(result.acknowledged for result in results)
    assert counts == [1, 2, 2, 2]


def test_a_burst_to_a_cold_broker_shares_one_connection(stream):
    _, prefix = stream
    with TcpProxy(("127.0.0.1", SHARED_PORT)) as proxy:
        request = a_request(proxy.port, f"{prefix}.a")

        async def burst():
            sender = KindSender(http=NoHttp(), timeout=3.0, allow_private=False)
            try:
                return await asyncio.gather(*(sender.send(request) for _ in range(5)))
            finally:
                await sender.close()

        results = asyncio.run(burst())

    assert all(result.acknowledged for result in results)
    assert proxy.accepted == 1


def test_a_host_not_listed_is_blocked_before_any_connection():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        [result] = send(a_request(port, "relay.a", broker_hosts=("nats.example.com",)))

        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody knocked
            listener.accept()
    assert (result.acknowledged, result.error_kind) == (False, "destination_blocked")
