"""django-webhook 0.0.15 + Celery (-c 8, Redis broker) on the realistic receiver (issue 8).

The peer the relay is compared with, at its defaults: a backlog of EVENTS
orders, each creation firing one webhook to each of ENDPOINTS Webhook rows
(fire_webhook tasks queued in Redis while no worker runs), then one
`celery worker -c 8` (prefork) drains them against bench/receiver.py --mix.
Throughput is counted as in bench/deliveries_bench.py: receipts over the
span from the first to the last.

    bench/peer/setup.sh                                  # builds bench/peer/.venv
    bench/peer/.venv/bin/python bench/peer/peer_bench.py --events 50

On database bench_peer (created here), Redis database 13 and a queue of its
own per run, so neither the relay's bench nor anyone else's Redis keys are
touched.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent


def database_prepare(name: str) -> None:
    import psycopg

    with psycopg.connect(
        "postgres://postgres@127.0.0.1:5432/postgres", autocommit=True
    ) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=HERE,
        check=True,
    )


def receiver_start() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / "receiver.py"), "--mix"],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(proc.stdout.readline().split()[1])
    return proc, f"http://127.0.0.1:{port}"


def dump(base: str) -> list:
    with urllib.request.urlopen(f"{base}/_dump", timeout=30) as response:
        return json.loads(response.read())


def backlog_make(base: str, *, endpoints: int, events: int) -> None:
    from django_webhook.models import (
        Webhook,
        WebhookEvent,
        WebhookSecret,
        WebhookTopic,
    )
    from orders.models import Order

    WebhookEvent.objects.all().delete()
    Webhook.objects.all().delete()
    Order.objects.all().delete()
    topic = WebhookTopic.objects.get(name="orders.Order/create")
    for i in range(endpoints):
        hook = Webhook.objects.create(url=f"{base}/e{i}")
        hook.topics.add(topic)
        WebhookSecret.objects.create(webhook=hook, token=uuid.uuid4().hex)
    for _ in range(events):
        Order.objects.create()  # post_save queues one fire_webhook per Webhook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--endpoints", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args(argv)
    os.environ["PEER_QUEUE"] = f"peer-bench-{uuid.uuid4().hex[:8]}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "peerproject.settings")
    sys.path.insert(0, str(HERE))
    database_prepare(os.environ.get("PEER_DB", "bench_peer"))
    import django

    django.setup()
    receiver, base = receiver_start()
    worker = None
    try:
        backlog_make(base, endpoints=args.endpoints, events=args.events)
        expected = args.events * args.endpoints
        load_before = Path("/proc/loadavg").read_text().split()[:3]
        started = time.time()
        worker = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "celery"),
                "-A",
                "peerproject",
                "worker",
                "-c",
                str(args.concurrency),
                "-Q",
                os.environ["PEER_QUEUE"],
                "-l",
                "warning",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=HERE,
        )
        deadline = time.monotonic() + args.timeout
        while len(dump(base)) < expected and time.monotonic() < deadline:
            time.sleep(0.5)
        received = dump(base)
    finally:
        if worker:
            worker.terminate()
            worker.wait(30)
        receiver.terminate()
    times = sorted(t for _, _, t in received)
    keys = {(p, w) for p, w, _ in received}
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    rate = (len(times) - 1) / span if span else 0.0
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"peer django-webhook 0.0.15 + celery -c {args.concurrency}: "
        f"{len(keys)} of {expected} received ({len(received) - len(keys)} dups), "
        f"{rate:.1f} deliveries/s, wall {times[-1] - started:.1f} s, "
        f"load {' '.join(load_before)} -> {' '.join(load_after)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
