"""RabbitMQ on loopback for the sender's tests: requests and messages for it,
a queue of the test's own to consume from, and a relay the test controls.

Every exchange and queue is named by a fresh uuid and deleted after use, so
two runs at once never meet; the shared broker is never reconfigured.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
from collections.abc import AsyncIterator
from uuid import uuid4

import aio_pika

from deliveries.dispatch.brokers import BrokerMessage, KindSender
from deliveries.dispatch.outgoing import signed_request
from deliveries.dispatch.transport import OutgoingRequest, SendResult
from tests.support.jobs import a_job

RABBIT = ("127.0.0.1", 5672)
SECRET = "whsec_c2VjcmV0"  # a_job()'s signing secret
TIMEOUT = 3.0


class NoHttp:
    """KindSender's HTTP sender: HTTP is not under test here."""

    async def send(self, request: OutgoingRequest) -> SendResult:
        raise AssertionError("an HTTP send in a RabbitMQ test")

    async def close(self) -> None:
        pass


def rabbit_request(
    *,
    exchange: str = "",
    routing_key: str = "",
    port: int = RABBIT[1],
    credentials: str = "guest:guest",
    broker_hosts: tuple[str, ...] = ("127.0.0.1",),
    event_id: str = "",
) -> OutgoingRequest:
    """A request signed now, as the dispatcher builds it, for a RabbitMQ endpoint."""
    job = a_job(event_id=event_id or f"evt_{uuid4().hex}")
    return dataclasses.replace(
        signed_request(job, timestamp=int(time.time())),
        url=f"amqp://127.0.0.1:{port}/",
        kind="rabbitmq",
        target={"exchange": exchange, "routing_key": routing_key},
        credentials=credentials,
        broker_hosts=broker_hosts,
    )


def broker_message(**changes) -> BrokerMessage:
    """A message for Sender.publish alone, without KindSender."""
    message = BrokerMessage(
        kind="rabbitmq",
        host=RABBIT[0],
        address=RABBIT[0],
        port=RABBIT[1],
        tls=False,
        path="",
        target={"exchange": "", "routing_key": "paid"},
        headers={"webhook-id": f"evt_{uuid4().hex}"},
        body=b"{}",
        timeout=TIMEOUT,
        user="guest",
        password="guest",
    )
    return dataclasses.replace(message, **changes)


def kind_sender(**options) -> KindSender:
    return KindSender(
        **{"http": NoHttp(), "timeout": TIMEOUT, "allow_private": False, **options}
    )


async def send_each(sender: KindSender, *requests: OutgoingRequest) -> list[SendResult]:
    return [await sender.send(request) for request in requests]


@dataclasses.dataclass
class Place:
    exchange: str
    routing_key: str
    queue: aio_pika.abc.AbstractQueue


@contextlib.asynccontextmanager
async def bound_queue(**queue_arguments) -> AsyncIterator[Place]:
    """A fresh direct exchange with a fresh queue bound under routing key
    "paid"; both deleted at the end."""
    connection = await aio_pika.connect(host=RABBIT[0], port=RABBIT[1])
    async with connection:
        channel = await connection.channel()
        name = f"test-rabbitmq-{uuid4().hex}"
        exchange = await channel.declare_exchange(name, auto_delete=True)
        queue = await channel.declare_queue(
            name, auto_delete=True, arguments=queue_arguments or None
        )
        await queue.bind(exchange, routing_key="paid")
        try:
            yield Place(exchange=name, routing_key="paid", queue=queue)
        finally:
            await queue.delete(if_unused=False, if_empty=False)
            await exchange.delete()


def text_headers(message: aio_pika.abc.AbstractIncomingMessage) -> dict[str, str]:
    return {
        name: value.decode() if isinstance(value, bytes) else str(value)
        for name, value in message.headers.items()
    }


class Relay:
    """A TCP relay to RabbitMQ on the test's own event loop. With `tls` it ends
    TLS with that server context, as an amqps broker would. stall() stops
    passing bytes either way (a broker that hangs mid-connection); flow()
    lets them through again."""

    def __init__(
        self, upstream: tuple[str, int] = RABBIT, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.upstream = upstream
        self.tls = tls
        self.connections = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(
            self._relay, "127.0.0.1", 0, ssl=self.tls
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    def stall(self) -> None:
        self._flowing.clear()

    def flow(self) -> None:
        self._flowing.set()

    async def _relay(self, client_reader, client_writer) -> None:
        self.connections += 1
        broker_reader, broker_writer = await asyncio.open_connection(*self.upstream)
        self._writers |= {client_writer, broker_writer}
        await asyncio.gather(
            self._pump(client_reader, broker_writer),
            self._pump(broker_reader, client_writer),
            return_exceptions=True,
        )

    async def _pump(self, source, destination) -> None:
        try:
            while data := await source.read(65536):
                await self._flowing.wait()
                destination.write(data)
                await destination.drain()
        finally:
            destination.close()
