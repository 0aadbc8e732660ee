"""CPU of the dispatcher's send loop per delivery (issue 21), with no database.

The real SendLoop and AsyncSender send a fixed workload (N in-memory Jobs over
M endpoints of bench/receiver.py --delay 0, fed 50 at a time as a dispatcher
hands them over) and the loop's own thread reports its CPU time
(`time.thread_time`), so the figure is CPU per delivery, which a shared
machine's load moves far less than a rate. `--floor` measures plain aiohttp
POSTs of the same shape on the same receiver: what the loop costs above it.

    .venv/bin/python bench/sendloop_cpu.py                       # this tree
    .venv/bin/python bench/sendloop_cpu.py --tree /tmp/old       # another tree
    .venv/bin/python bench/sendloop_cpu.py --floor --rounds 3
    .venv/bin/python bench/sendloop_cpu.py --profile out.prof    # cProfile, thread CPU

Tracing is off (no OTEL_* variable), as at the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import os
import queue
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
HANDOVER = 50  # jobs per add(), as the dispatcher hands a claim over


def receiver_start() -> tuple[subprocess.Popen, int]:
    receiver = subprocess.Popen(
        [sys.executable, str(HERE / "receiver.py"), "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    return receiver, int(receiver.stdout.readline().split()[1])


def django_setup(tree: Path) -> None:
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    os.environ.setdefault("DEBUG", "true")
    os.environ.setdefault(
        "RELAY_ENCRYPTION_KEYS", base64.urlsafe_b64encode(b"k" * 32).decode()
    )
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    import django

    django.setup()


def jobs_make(*, count: int, endpoints: int, port: int, concurrency: int) -> list:
    from deliveries import signing
    from deliveries.dispatch.jobs import Job

    now = datetime.now(UTC)
    secret = "whsec_" + base64.b64encode(b"s" * 32).decode()
    jobs = []
    for i in range(count):
        event_id = f"evt_{i:026d}"
        body = signing.serialize_body(
            event_id=event_id,
            event_type="order.paid",
            created_at=now,
            data={"n": i, "amount": 1999, "currency": "EUR", "note": "x" * 40},
        )
        jobs.append(
            Job(
                delivery_id=f"dlv_{i:026d}",
                event_id=event_id,
                endpoint_id=f"ep_{i % endpoints}",
                url=f"http://127.0.0.1:{port}/e{i % endpoints}",
                body=body,
                secrets=[secret],
                attempt_count=0,
                budget_start=0,
                max_attempts=10,
                rate_limit_per_second=None,
                max_in_flight=concurrency,
                is_probe=False,
                lease_until=now + timedelta(hours=1),
                headers={"X-Api-Key": "k-123"},
                merchant_id=1,
                published_at=now,
            )
        )
    return jobs


def loop_run(jobs: list, *, concurrency: int, profile: str = "") -> tuple[float, float]:
    """Send every job through a fresh SendLoop; (its thread's CPU s, wall s)."""
    from deliveries.dispatch.sendloop import Capacity, Finished, SendLoop, Stopped
    from deliveries.dispatch.transport import AsyncSender
    from relayproject.lib.clock import SystemClock

    class Measured(SendLoop):
        def _run(self) -> None:
            profiler = cProfile.Profile(time.thread_time) if profile else None
            self.cpu = -time.thread_time()
            if profiler:
                profiler.enable()
            try:
                super()._run()
            finally:
                self.cpu += time.thread_time()
                if profiler:
                    profiler.disable()
                    profiler.dump_stats(profile)

    outbox: queue.SimpleQueue = queue.SimpleQueue()
    loop = Measured(
        sender=AsyncSender(
            timeout=10, body_limit=4096, allow_private=True, limit=concurrency
        ),
        concurrency=concurrency,
        outbox=outbox,
        clock=SystemClock(),
        timeout=10,
    )
    loop.start()
    handed = done = 0
    capacity = Capacity(0, 0, 0)
    began = time.monotonic()
    while done < len(jobs):
        # The dispatcher's rule: claim again once fewer than half a hand-over wait.
        if (
            handed < len(jobs)
            and capacity.ready + handed - capacity.received < HANDOVER // 2
        ):
            loop.add(jobs[handed : handed + HANDOVER])
            handed += HANDOVER
        try:
            message = outbox.get(timeout=0.05)
        except queue.Empty:
            continue
        if isinstance(message, Capacity):
            capacity = message
        elif isinstance(message, Finished):
            done += 1
            if message.result is None or message.result.status_code != 200:
                raise SystemExit(f"a send failed: {message.result}")
    wall = time.monotonic() - began
    loop.stop()
    while not isinstance(outbox.get(), Stopped):
        pass
    loop.join()
    return loop.cpu, wall


async def floor_run(
    *, count: int, endpoints: int, port: int, concurrency: int
) -> float:
    """Plain aiohttp POSTs of the same size and headers; this thread's CPU s."""
    import aiohttp

    body = b'{"id":"evt","type":"order.paid","data":{"note":"' + b"x" * 100 + b'"}}'
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=0)
    async with aiohttp.ClientSession(
        connector=connector, auto_decompress=False
    ) as session:
        numbers = iter(range(count))

        async def worker() -> None:
            for i in numbers:
                headers = {
                    "X-Api-Key": "k-123",
                    "Content-Type": "application/json",
                    "webhook-id": f"evt_{i}",
                    "webhook-timestamp": "1700000000",
                    "webhook-signature": "v1," + "x" * 44,
                    "X-Relay-Event-Id": f"evt_{i}",
                    "X-Relay-Delivery-Id": f"dlv_{i}",
                    "X-Relay-Attempt": "1",
                    "User-Agent": "webhook-relay/1.0",
                    "Accept-Encoding": "identity",
                }
                url = f"http://127.0.0.1:{port}/e{i % endpoints}"
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()

        cpu = -time.thread_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return cpu + time.thread_time()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--endpoints", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--tree", default=str(HERE.parent), help="project tree to measure"
    )
    parser.add_argument("--floor", action="store_true", help="plain aiohttp too")
    parser.add_argument(
        "--profile", default="", help="write a cProfile of the last round"
    )
    args = parser.parse_args(argv)

    django_setup(Path(args.tree).resolve())
    receiver, port = receiver_start()
    try:
        jobs = jobs_make(
            count=args.deliveries,
            endpoints=args.endpoints,
            port=port,
            concurrency=args.concurrency,
        )
        loop_run(jobs[:500], concurrency=args.concurrency)  # warm: sockets, caches
        per_delivery = []
        for n in range(args.rounds):
            load = os.getloadavg()[0]
            last = n == args.rounds - 1
            cpu, wall = loop_run(
                jobs, concurrency=args.concurrency, profile=args.profile if last else ""
            )
            per_delivery.append(cpu / len(jobs) * 1000)
            print(
                f"send loop: {len(jobs)} deliveries, concurrency {args.concurrency}, "
                f"{cpu:.2f} s CPU = {per_delivery[-1]:.3f} ms per delivery "
                f"(wall {wall:.1f} s, load {load:.2f} -> {os.getloadavg()[0]:.2f})",
                flush=True,
            )
            if args.floor:
                cpu = asyncio.run(
                    floor_run(
                        count=len(jobs),
                        endpoints=args.endpoints,
                        port=port,
                        concurrency=args.concurrency,
                    )
                )
                print(
                    f"plain aiohttp: {cpu / len(jobs) * 1000:.3f} ms per request",
                    flush=True,
                )
        if args.rounds > 1:
            print(f"median: {statistics.median(per_delivery):.3f} ms per delivery")
    finally:
        receiver.terminate()
        receiver.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
