"""bench/broker_consumer.py against the loopback brokers: its targets are ones
the relay accepts, it records what is published to them, it stops as soon
as it has what it expects, and it leaves nothing behind on the broker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import pytest

from bench.broker_consumer import KINDS, consume, targets
from endpoints import brokers

URLS = {
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/",
    "nats": "nats://127.0.0.1:4222",
    "redis": "redis://127.0.0.1:6379/0",
    "mqtt": "mqtt://127.0.0.1:1883",
}
ENDPOINTS = 2
BOUND_SECONDS = 15  # the whole consume, far under the settle time below
SETTLE_SECONDS = 60  # long: a consume that waits for it fails the bound


@pytest.mark.parametrize("kind", KINDS)
def test_every_target_is_one_the_relay_accepts(kind):
    made = targets(kind, uuid.uuid4().hex[:12], 3)

    assert [brokers.target_errors(kind, t) for t in made] == [{}, {}, {}]
    assert len({json.dumps(t, sort_keys=True) for t in made}) == 3


def body(event_id: str) -> bytes:
    return json.dumps({"id": event_id, "type": "order.paid", "data": {}}).encode()


async def publish(kind: str, target: dict, payload: bytes) -> None:
    """One message, as a publisher the broker acknowledges."""
    if kind == "rabbitmq":
        import aio_pika

        async with await aio_pika.connect(URLS[kind]) as connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.default_exchange.publish(
                aio_pika.Message(payload), routing_key=target["routing_key"]
            )
    elif kind == "nats":
        import nats

        client = await nats.connect(URLS[kind])
        await client.jetstream().publish(target["subject"], payload)
        await client.close()
    elif kind == "redis":
        import redis.asyncio as redis

        async with redis.Redis.from_url(URLS[kind]) as client:
            await client.xadd(target["stream"], {"body": payload})
    else:
        import aiomqtt

        async with aiomqtt.Client(
            "127.0.0.1", 1883, protocol=aiomqtt.ProtocolVersion.V5
        ) as client:
            await client.publish(target["topic"], payload, qos=1)


async def left_behind(kind: str, run_id: str) -> list[str]:
    """What the run's names still hold on the broker (MQTT keeps nothing)."""
    made = targets(kind, run_id, ENDPOINTS)
    if kind == "rabbitmq":
        import aio_pika

        found = []
        async with await aio_pika.connect(URLS[kind]) as connection:
            for target in made:
                channel = await connection.channel()
                # A queue that is not there closes the channel: not found.
                with contextlib.suppress(aio_pika.exceptions.ChannelClosed):
                    await channel.declare_queue(target["routing_key"], passive=True)
                    found.append(target["routing_key"])
        return found
    if kind == "nats":
        import nats

        client = await nats.connect(URLS[kind])
        names = await client.jetstream().streams_info()
        await client.close()
        return [s.config.name for s in names if run_id in s.config.name]
    if kind == "redis":
        import redis.asyncio as redis

        async with redis.Redis.from_url(URLS[kind]) as client:
            return [t["stream"] for t in made if await client.exists(t["stream"])]
    return []


@pytest.mark.parametrize("kind", KINDS)
def test_it_records_each_message_and_stops_once_it_has_them_all(kind):
    run_id = uuid.uuid4().hex[:12]
    made = targets(kind, run_id, ENDPOINTS)
    names = {"rabbitmq": "routing_key", "nats": "subject", "redis": "stream"}
    name = names.get(kind, "topic")

    async def publish_both() -> None:
        await publish(kind, made[0], body("evt_a"))
        await publish(kind, made[1], body("evt_b"))

    async def run() -> list:
        return await asyncio.wait_for(
            consume(
                kind,
                url=URLS[kind],
                run_id=run_id,
                endpoints=ENDPOINTS,
                expect=2,
                settle=SETTLE_SECONDS,
                meanwhile=publish_both,
            ),
            BOUND_SECONDS,
        )

    received = asyncio.run(run())

    assert sorted((target, wid) for target, wid, _ in received) == [
        (made[0][name], "evt_a"),
        (made[1][name], "evt_b"),
    ]
    assert asyncio.run(left_behind(kind, run_id)) == []
