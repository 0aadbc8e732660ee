"""A loopback broker consumer for bench/brokers_bench.py, run as its own process.

The broker kinds' counterpart of bench/receiver.py: it subscribes to the
bench's targets on one broker, records the wall-clock time each message
arrives, with its target and its event id, and answers nothing (a broker
acknowledges the relay's publish itself). Every name it uses carries the
run's id, and it removes what it made (queues, stream, stream keys) when it
ends, so two runs never meet.

    python bench/broker_consumer.py rabbitmq --url amqp://guest:guest@127.0.0.1:5672/ \
        --run-id 1a2b3c --endpoints 20 --expect 2000

It prints "ready" once subscribed. When its stdin closes (the dispatcher has
finished) it waits until it holds --expect distinct messages, or until
--settle seconds pass with none arriving, then prints its record as one JSON
line, [[target, event id, unix time], ...], and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

KINDS = ("rabbitmq", "nats", "redis", "mqtt")
SETTLE_SECONDS = 5.0  # quiet time after which what has arrived is all there is
READ_BATCH = 1000  # Redis entries read per XREAD, RabbitMQ messages prefetched

Record = Callable[[str, bytes], None]


def targets(kind: str, run_id: str, endpoints: int) -> list[dict[str, object]]:
    """The endpoint targets of a run: one queue, subject, stream or topic each."""
    if kind == "rabbitmq":
        # The default exchange routes a routing key to the queue of that name.
        return [
            {"exchange": "", "routing_key": f"bench-{run_id}-e{i}"}
            for i in range(endpoints)
        ]
    if kind == "nats":
        return [{"subject": f"bench.{run_id}.e{i}"} for i in range(endpoints)]
    if kind == "redis":
        return [{"stream": f"bench:{run_id}:e{i}"} for i in range(endpoints)]
    if kind == "mqtt":
        return [{"topic": f"bench/{run_id}/e{i}"} for i in range(endpoints)]
    raise ValueError(f"not a broker kind: {kind!r}")


def event_id(body: bytes) -> str:
    """The event id of a relay message: the body's "id" (also its webhook-id)."""
    return json.loads(body)["id"]


# Each consumer subscribes, then returns a coroutine function that removes
# what it made. The clients are imported here, not at the top: each is an
# optional dependency (the `brokers` extra) and a run may use only some.


async def rabbitmq(url: str, run_id: str, endpoints: int, record: Record):
    import aio_pika

    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=READ_BATCH)
    for target in targets("rabbitmq", run_id, endpoints):
        name = str(target["routing_key"])
        # Exclusive: the queue goes with this connection, whatever ends it.
        queue = await channel.declare_queue(name, exclusive=True)

        async def on_message(message, name=name) -> None:
            record(name, message.body)

        await queue.consume(on_message, no_ack=True)
    return connection.close


async def nats(url: str, run_id: str, endpoints: int, record: Record):
    import nats as nats_client
    from nats.js.api import StorageType

    client = await nats_client.connect(url)
    stream = f"BENCH_{run_id}"
    jetstream = client.jetstream()
    # The relay's publish counts only once a stream stores it; memory storage
    # keeps the broker's disk out of the figure.
    await jetstream.add_stream(
        name=stream, subjects=[f"bench.{run_id}.>"], storage=StorageType.MEMORY
    )

    async def on_message(message) -> None:
        record(message.subject, message.data)

    # A plain subscription sees every message the stream stores, as it is stored.
    await client.subscribe(f"bench.{run_id}.>", cb=on_message)

    async def remove() -> None:
        await jetstream.delete_stream(stream)
        await client.drain()

    return remove


async def redis(url: str, run_id: str, endpoints: int, record: Record):
    import redis.asyncio as redis_client

    client = redis_client.Redis.from_url(url)
    keys = [str(t["stream"]) for t in targets("redis", run_id, endpoints)]
    last = dict.fromkeys(keys, "0-0")  # the keys are new: read from the start
    ready = asyncio.Event()

    async def read() -> None:
        while True:
            ready.set()
            for key, entries in await client.xread(last, count=READ_BATCH, block=500):
                for entry_id, fields in entries:
                    last[key.decode()] = entry_id
                    record(key.decode(), fields[b"body"])

    reader = asyncio.create_task(read())
    await ready.wait()

    async def remove() -> None:
        reader.cancel()
        await client.delete(*keys)
        await client.aclose()

    return remove


async def mqtt(url: str, run_id: str, endpoints: int, record: Record):
    import aiomqtt
    from yarl import URL

    where = URL(url)
    client = aiomqtt.Client(
        where.host or "127.0.0.1",
        where.port or 1883,
        protocol=aiomqtt.ProtocolVersion.V5,
    )
    await client.__aenter__()
    await client.subscribe(f"bench/{run_id}/#", qos=1)

    async def read() -> None:
        async for message in client.messages:
            record(message.topic.value, message.payload)

    reader = asyncio.create_task(read())

    async def remove() -> None:
        reader.cancel()
        await client.__aexit__(None, None, None)

    return remove


CONSUMERS = {"rabbitmq": rabbitmq, "nats": nats, "redis": redis, "mqtt": mqtt}


async def consume(
    kind: str,
    *,
    url: str,
    run_id: str,
    endpoints: int,
    expect: int,
    settle: float,
    meanwhile: Callable[[], Awaitable[object]] = lambda: asyncio.to_thread(
        sys.stdin.read
    ),
) -> list[tuple[str, str, float]]:
    """Subscribe, say "ready", and record while `meanwhile` runs (by default
    until stdin ends), then until `expect` distinct messages have arrived or
    `settle` seconds pass without one."""
    received: list[tuple[str, str, float]] = []
    seen: set[tuple[str, str]] = set()
    arrived = asyncio.Event()

    def record(target: str, body: bytes) -> None:
        wid = event_id(body)
        received.append((target, wid, time.time()))
        seen.add((target, wid))
        arrived.set()

    remove = await CONSUMERS[kind](url, run_id, endpoints, record)
    try:
        print("ready", flush=True)
        await meanwhile()
        while len(seen) < expect:
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), settle)
            except TimeoutError:
                break
    finally:
        await remove()
    return received


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--url", required=True, help="the broker, as a relay URL")
    parser.add_argument("--run-id", required=True, help="in every name, as targets()")
    parser.add_argument("--endpoints", type=int, required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS)
    args = parser.parse_args(argv)
    received = asyncio.run(
        consume(
            args.kind,
            url=args.url,
            run_id=args.run_id,
            endpoints=args.endpoints,
            expect=args.expect,
            settle=args.settle,
        )
    )
    print(json.dumps(received), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
