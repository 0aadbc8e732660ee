"""The RabbitMQ sender through KindSender, against the real broker on loopback
(127.0.0.1:5672, guest/guest). Every exchange and queue is the test's own,
named by a fresh uuid and deleted after it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading
import time
from uuid import uuid4

import aio_pika
import pytest
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.brokers.rabbitmq import Sender
from deliveries.dispatch.transport import wire_headers
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support.rabbitmq import (
    RABBIT,
    SECRET,
    TIMEOUT,
    bound_queue,
    broker_message,
    kind_sender,
    rabbit_request,
    send_each,
    text_headers,
)


def test_a_consumer_gets_the_exact_body_and_headers_and_verifies_the_signature():
    async def go():
        async with bound_queue() as place:
            request = rabbit_request(
                exchange=place.exchange, routing_key=place.routing_key
            )
            sender = kind_sender()
            try:
                result = await sender.send(request)
            finally:
                await sender.close()
            received = await place.queue.get(no_ack=True, timeout=TIMEOUT)
            return request, result, received

    request, result, received = asyncio.run(go())
    assert result.acknowledged, result
    assert result.body_excerpt == (
        f"publisher confirm: ack (exchange '{request.target['exchange']}', "
        "routing key 'paid')"
    )
    assert received.body == request.body
    headers = text_headers(received)
    assert headers == wire_headers(request)
    assert received.message_id == request.headers["webhook-id"]
    assert received.content_type == "application/json"
    assert received.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    Webhook(SECRET).verify(received.body, headers)  # raises unless it verifies


def test_an_unroutable_message_is_returned_and_fails_as_broker_refused():
    async def go():
        async with bound_queue() as place:
            sender = kind_sender()
            try:
                request = rabbit_request(exchange=place.exchange, routing_key="nobody")
                return place.exchange, await sender.send(request)
            finally:
                await sender.close()

    exchange, result = asyncio.run(go())
    assert not result.acknowledged
    assert result.error_kind == "broker_refused"
    assert result.error_message == (
        f"RabbitMQ returned the message: NO_ROUTE (exchange '{exchange}', "
        "routing key 'nobody')"
    )


def test_a_missing_exchange_is_broker_refused_and_the_next_send_gets_a_new_channel():
    missing = f"test-rabbitmq-missing-{uuid4().hex}"

    async def go():
        async with bound_queue() as place:
            sender = kind_sender()
            try:
                return await send_each(
                    sender,
                    rabbit_request(exchange=missing, routing_key="paid"),
                    rabbit_request(exchange=place.exchange, routing_key="paid"),
                )
            finally:
                await sender.close()

    missed, after = asyncio.run(go())
    assert (missed.acknowledged, missed.error_kind) == (False, "broker_refused")
    assert f"NOT_FOUND - no exchange '{missing}' in vhost '/'" in missed.error_message
    assert after.acknowledged, after


def test_an_exchange_the_broker_refuses_access_to_is_broker_auth():
    # Every vhost has this internal exchange, which nobody may publish to.
    async def go():
        sender = kind_sender()
        try:
            return await sender.send(
                rabbit_request(exchange="amq.rabbitmq.trace", routing_key="paid")
            )
        finally:
            await sender.close()

    result = asyncio.run(go())
    assert (result.acknowledged, result.error_kind) == (False, "broker_auth")
    assert (
        "ACCESS_REFUSED - cannot publish to internal exchange" in result.error_message
    )


def test_a_nack_is_broker_refused():
    async def go():
        # A queue that holds nothing and refuses what overflows: RabbitMQ nacks.
        async with bound_queue(
            **{"x-max-length": 0, "x-overflow": "reject-publish"}
        ) as place:
            sender = kind_sender()
            try:
                return await sender.send(
                    rabbit_request(exchange=place.exchange, routing_key="paid")
                )
            finally:
                await sender.close()

    result = asyncio.run(go())
    assert (result.acknowledged, result.error_kind) == (False, "broker_refused")
    assert "it answered Basic.Nack" in result.error_message


def test_one_event_sent_to_two_routing_keys_at_once_gets_each_its_own_answer():
    # Both carry the same message id (the event's webhook-id) on one channel.
    event_id = f"evt_{uuid4().hex}"

    async def go():
        async with bound_queue() as place:
            sender = kind_sender()
            try:
                results = await asyncio.gather(
                    sender.send(
                        rabbit_request(
                            exchange=place.exchange,
                            routing_key="nobody",
                            event_id=event_id,
                        )
                    ),
                    sender.send(
                        rabbit_request(
                            exchange=place.exchange,
                            routing_key="paid",
                            event_id=event_id,
                        )
                    ),
                )
            finally:
                await sender.close()
            return results, await place.queue.get(no_ack=True, fail=False)

    (unroutable, routed), received = asyncio.run(go())
    assert unroutable.error_kind == "broker_refused", unroutable
    assert "returned the message: NO_ROUTE" in unroutable.error_message
    assert routed.acknowledged, routed
    assert received is not None


def test_a_wrong_password_is_broker_auth_and_the_password_is_never_shown():
    password = f"wrong-{uuid4().hex}"
    request = rabbit_request(routing_key="paid", credentials=f"guest:{password}")

    async def go():
        sender = kind_sender()
        try:
            result = await sender.send(request)
        finally:
            await sender.close()
        # The sender's own words, before KindSender scrubs anything.
        rabbit = Sender(limit=1)
        try:
            await rabbit.publish(broker_message(password=password))
        except Exception as exc:  # noqa: BLE001 - its text is what is checked
            own_words = f"{exc!s} {exc!r}"
        finally:
            await rabbit.close()
        return result, own_words

    result, own_words = asyncio.run(go())
    assert (result.acknowledged, result.error_kind) == (False, "broker_auth")
    assert "refused the login of user 'guest': ACCESS_REFUSED" in result.error_message
    for text in (result.error_message, result.body_excerpt, own_words):
        assert password not in text


def test_a_cut_connection_fails_one_send_and_the_next_redials():
    async def go():
        async with bound_queue() as place:
            with TcpProxy(RABBIT) as proxy:
                request = rabbit_request(
                    exchange=place.exchange, routing_key="paid", port=proxy.port
                )
                sender = kind_sender()
                try:
                    before = await sender.send(request)
                    proxy.cut()
                    during = await sender.send(request)
                    proxy.resume()
                    after = await sender.send(request)
                finally:
                    await sender.close()
                return before, during, after, proxy.accepted

    before, during, after, dialled = asyncio.run(go())
    assert before.acknowledged, before
    assert (during.acknowledged, during.error_kind) == (False, "connection_error")
    assert after.acknowledged, after
    assert dialled == 2


class SilentBroker:
    """Accepts connections and never answers; records when each is closed."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        self.closed_by_client = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            client, _ = self._listener.accept()
            self.accepted += 1
            with client:
                client.settimeout(TIMEOUT * 2)
                while client.recv(4096):  # the protocol header, then EOF
                    pass
                self.closed_by_client.set()

    def close(self) -> None:
        self._listener.close()


def test_a_broker_that_never_answers_times_out_and_its_socket_is_closed():
    broker = SilentBroker()

    async def go():
        sender = kind_sender(timeout=1.0)
        started = time.monotonic()
        try:
            result = await sender.send(
                rabbit_request(routing_key="q", port=broker.port)
            )
        finally:
            await sender.close()
        return result, time.monotonic() - started

    try:
        result, took = asyncio.run(go())
        assert (result.acknowledged, result.error_kind) == (False, "timeout")
        assert took < 1.0 + 1
        assert broker.closed_by_client.wait(TIMEOUT), "the socket was left open"
    finally:
        broker.close()


def established_to(port: int) -> int:
    """Open TCP connections from this machine to 127.0.0.1:port."""
    count = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            remote, state = line.split()[2:4]
            if state == "01" and int(remote.split(":")[1], 16) == port:
                count += 1
    return count


def test_the_pool_keeps_at_most_its_limit_of_connections_open():
    async def go():
        async with bound_queue() as place:
            with TcpProxy(RABBIT) as a, TcpProxy(RABBIT) as b, TcpProxy(RABBIT) as c:
                rabbit = Sender(limit=2)
                sender = kind_sender(senders={"rabbitmq": rabbit})
                try:
                    results = await send_each(
                        sender,
                        *(
                            rabbit_request(
                                exchange=place.exchange, routing_key="paid", port=p.port
                            )
                            for p in (a, b, c)
                        ),
                    )
                    await rabbit.settled()
                    return results, [established_to(p.port) for p in (a, b, c)]
                finally:
                    await sender.close()

    results, open_per_broker = asyncio.run(go())
    assert all(r.acknowledged for r in results), results
    assert open_per_broker == [0, 1, 1]  # the least recently used was closed


def test_a_host_not_listed_is_blocked_before_any_connection():
    broker = SilentBroker()

    async def go():
        sender = kind_sender()
        try:
            return await sender.send(
                rabbit_request(
                    routing_key="q",
                    port=broker.port,
                    broker_hosts=("rabbit.example.com",),
                )
            )
        finally:
            await sender.close()

    try:
        result = asyncio.run(go())
    finally:
        broker.close()
    assert result.error_kind == "destination_blocked"
    assert broker.accepted == 0


@pytest.mark.parametrize("vhost", ["", "/"])
def test_the_default_vhost_is_reached_with_an_empty_or_slash_path(vhost):
    async def go():
        async with bound_queue() as place:
            request = dataclasses.replace(
                rabbit_request(exchange=place.exchange, routing_key="paid"),
                url=f"amqp://127.0.0.1:{RABBIT[1]}/{'%2F' if vhost else ''}",
            )
            sender = kind_sender()
            try:
                return await sender.send(request)
            finally:
                await sender.close()

    assert asyncio.run(go()).acknowledged
