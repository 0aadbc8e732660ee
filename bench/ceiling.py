"""The aiohttp ceiling (issue 8): plain aiohttp POSTs, no database, no signing.

COUNT requests with IN_FLIGHT of them outstanding at any moment, spread over
ENDPOINTS paths of one receiver (bench/receiver.py), the same body and
webhook-ids the relay would send. What the relay's sender could do if
claiming, signing and recording cost nothing: the figure each dispatcher
run is compared with.

    .venv/bin/python bench/ceiling.py --url http://127.0.0.1:PORT --count 5000

Used by bench/deliveries_bench.py, which starts the receivers itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import aiohttp

BODY = json.dumps(
    {
        "type": "order.paid",
        "data": {"order_id": 0, "amount": 1999, "currency": "EUR", "note": "x" * 120},
    }
).encode()


async def post_all(
    base: str, *, ids: list[str], endpoints: int, in_flight: int
) -> float:
    """POST one request per id, at most in_flight at once; return the seconds taken."""
    connector = aiohttp.TCPConnector(limit=in_flight, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=30)
    queue = iter(enumerate(ids))

    async def worker(session: aiohttp.ClientSession) -> None:
        for n, wid in queue:
            async with session.post(
                f"{base}/e{n % endpoints}",
                data=BODY,
                headers={"Content-Type": "application/json", "webhook-id": wid},
            ) as response:
                await response.read()

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.monotonic()
        await asyncio.gather(*(worker(session) for _ in range(in_flight)))
        return time.monotonic() - started


def ceiling_run(base: str, *, ids: list[str], endpoints: int, in_flight: int) -> float:
    return asyncio.run(
        post_all(base, ids=ids, endpoints=endpoints, in_flight=in_flight)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="receiver base URL")
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--endpoints", type=int, default=20)
    parser.add_argument("--in-flight", type=int, default=512)
    args = parser.parse_args(argv)
    ids = [f"evt_ceiling{i:07d}" for i in range(args.count)]
    seconds = ceiling_run(
        args.url, ids=ids, endpoints=args.endpoints, in_flight=args.in_flight
    )
    print(f"{args.count} requests in {seconds:.2f} s: {args.count / seconds:.0f}/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
