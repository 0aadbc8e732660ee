"""The RabbitMQ sender through a relay the test controls: a broker that stalls
in the middle of a publish, and amqps with a certificate for the URL's name
while the sender dials the pinned address."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl

import pytest
import trustme

from deliveries.dispatch.brokers.rabbitmq import Sender
from tests.support.rabbitmq import (
    Relay,
    bound_queue,
    broker_message,
    kind_sender,
    rabbit_request,
)

TLS_HOST = "rabbit.relay-test.example"
STALL_SECONDS = 0.5  # how long the test waits on a stalled publish before cancelling it


def test_a_publish_cancelled_mid_flight_drops_its_connection_and_the_next_redials():
    async def go():
        async with bound_queue() as place, Relay() as relay:
            rabbit = Sender(limit=4)
            message = broker_message(
                port=relay.port,
                target={"exchange": place.exchange, "routing_key": "paid"},
            )
            try:
                await rabbit.publish(message)
                relay.stall()
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(STALL_SECONDS):
                        await rabbit.publish(message)
                relay.flow()
                answer = await rabbit.publish(message)
            finally:
                await rabbit.close()
            return answer, relay.connections

    answer, connections = asyncio.run(go())
    assert answer.startswith("publisher confirm: ack")
    assert connections == 2  # the stalled connection was not used again


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def tls_contexts(authority: trustme.CA, names: list[str]):
    """(the relay's server context, holding a certificate for TLS_HOST and
    recording the server names clients ask for; the sender's client context)."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(TLS_HOST).configure_cert(server)
    server.sni_callback = lambda _socket, name, _context: names.append(name)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


def send_over_tls(authority: trustme.CA, host: str):
    """Send to amqps://host through a TLS relay, host resolving to 127.0.0.1."""
    names: list[str] = []
    server, client = tls_contexts(authority, names)

    async def go():
        async with bound_queue() as place, Relay(tls=server) as relay:
            request = dataclasses.replace(
                rabbit_request(exchange=place.exchange, routing_key="paid"),
                url=f"amqps://{host}:{relay.port}/",
                broker_hosts=(host, "127.0.0.1"),
            )
            sender = kind_sender(
                ssl_context=client, resolve=lambda _host, _port: ["127.0.0.1"]
            )
            try:
                result = await sender.send(request)
            finally:
                await sender.close()
            return result, await place.queue.get(no_ack=True, fail=False)

    result, received = asyncio.run(go())
    return result, received, names


def test_amqps_checks_the_certificate_against_the_url_host_not_the_pinned_address(
    authority,
):
    result, received, names = send_over_tls(authority, TLS_HOST)
    assert result.acknowledged, result
    assert received is not None
    assert names == [TLS_HOST]  # SNI names the host, never the address dialled


def test_amqps_with_a_certificate_for_another_name_is_a_tls_error(authority):
    result, received, _names = send_over_tls(authority, "other.relay-test.example")
    assert (result.acknowledged, result.error_kind) == (False, "tls_error")
    assert "certificate" in result.error_message.lower()
    assert received is None
