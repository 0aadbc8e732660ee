"""Client CPU per request: aiohttp (bench/ceiling.py), the relay's sender, a bare protocol.

What an HTTP client with little Python per request could save the dispatcher's
send loop (issue 21): the same POSTs, 512 in flight over 20 paths of one
receiver (bench/receiver.py), keep-alive, measured as this process's CPU time
per request. "relay" is the dispatcher's own AsyncSender
(deliveries/dispatch/http1.py), limits and all. The bare client is a floor, not a sender: it writes a prebuilt
request and reads a Content-Length answer, with none of the limits, TLS,
chunked bodies or error handling a hostile receiver needs.

    .venv/bin/python bench/receiver.py --port 18777 &
    .venv/bin/python bench/client_cost.py http://127.0.0.1:18777 --count 20000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from ceiling import BODY, post_all
from sendloop_cpu import django_setup


class _Answer(asyncio.Protocol):
    """One keep-alive connection; `waiter` resolves with each answer's status."""

    def __init__(self) -> None:
        self.buffer = b""
        self.waiter: asyncio.Future | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(rest) >= length:
            self.buffer = rest[length:]
            waiter, self.waiter = self.waiter, None
            waiter.set_result(int(head[9:12]))


async def bare_all(base: str, *, ids: list[str], endpoints: int, in_flight: int):
    where = urlsplit(base)
    loop = asyncio.get_running_loop()
    queue = iter(enumerate(ids))

    async def worker() -> None:
        _, conn = await loop.create_connection(_Answer, where.hostname, where.port)
        for n, wid in queue:
            conn.waiter = loop.create_future()
            conn.transport.write(
                f"POST /e{n % endpoints} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                f"Content-Type: application/json\r\nwebhook-id: {wid}\r\n"
                f"Content-Length: {len(BODY)}\r\n\r\n".encode()
                + BODY
            )
            async with asyncio.timeout(30):
                await conn.waiter
        conn.transport.close()

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def relay_all(base: str, *, ids: list[str], endpoints: int, in_flight: int):
    from deliveries.dispatch.transport import AsyncSender, OutgoingRequest

    sender = AsyncSender(timeout=30, body_limit=1024, allow_private=True)
    queue = iter(enumerate(ids))

    async def worker() -> None:
        for n, wid in queue:
            result = await sender.send(
                OutgoingRequest(
                    url=f"{base}/e{n % endpoints}",
                    headers={"Content-Type": "application/json", "webhook-id": wid},
                    body=BODY,
                )
            )
            assert result.status_code == 200, result

    try:
        await asyncio.gather(*(worker() for _ in range(in_flight)))
    finally:
        await sender.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="receiver base URL")
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    django_setup(Path(__file__).resolve().parent.parent)  # for the relay's sender
    ids = [f"evt_cost{i:07d}" for i in range(args.count)]
    for _ in range(args.rounds):
        runs = (("aiohttp", post_all), ("relay", relay_all), ("bare", bare_all))
        for name, run in runs:
            cpu, wall = time.process_time(), time.monotonic()
            asyncio.run(run(args.url, ids=ids, endpoints=20, in_flight=512))
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
            print(
                f"{name:8} {args.count / wall:7.0f} requests/s, "
                f"client CPU {cpu / args.count * 1e6:6.1f} us a request"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
