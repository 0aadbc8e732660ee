"""Crash soak (issue 23): how long after the last crash every delivery is done.

Three `run_dispatcher` processes against PostgreSQL and a loopback receiver
(bench/receiver.py, issue 8's latency mix, 4 endpoints); events are
published at --rate per second for --seconds; every --kill-every seconds one
dispatcher, chosen at random, is killed with SIGKILL and a new one started
under a new worker id. When publishing stops, the soak waits until no
delivery is pending or delivering and reports the time from the last kill
to that moment (the figure), with duplicates, reclaimed and released
counts, dispatchers declared dead and the load average.

    .venv/bin/python bench/crash_soak.py                  # 60 s, ~1.5 min
    .venv/bin/python bench/crash_soak.py --dead-after 10  # another threshold

Its own database (--database-url, default bench_soak), emptied first;
loopback only, bounded by --timeout. The defaults of every setting but
DISPATCHER_DEAD_AFTER_SECONDS (when given) are the contract's.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import deliveries_bench as bench  # noqa: E402 - the sibling script's helpers

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/bench_soak"
ENDPOINTS = 4


class Fleet:
    """The dispatchers, each with its own log in bench/out/."""

    def __init__(self, *, db_url: str, dead_after: float | None) -> None:
        self.env = bench.dispatcher_env(db_url)
        if dead_after is not None:
            self.env["DISPATCHER_DEAD_AFTER_SECONDS"] = str(dead_after)
        self.running: list[subprocess.Popen] = []
        self.started = 0
        bench.OUT.mkdir(exist_ok=True)

    def start(self) -> None:
        worker = f"soak-{self.started}"
        self.started += 1
        log = open(bench.OUT / f"{worker}.log", "w")  # noqa: SIM115 - closed with the process
        self.running.append(
            subprocess.Popen(
                [
                    bench.PYTHON,
                    "manage.py",
                    "run_dispatcher",
                    "--skip-checks",
                    "--worker-id",
                    worker,
                ],
                cwd=bench.ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def kill_one(self, rand: random.Random) -> None:
        victim = self.running.pop(rand.randrange(len(self.running)))
        victim.send_signal(signal.SIGKILL)
        victim.wait()

    def stop(self) -> None:
        for proc in self.running:
            proc.send_signal(signal.SIGTERM)
        for proc in self.running:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def publish(rate: float, seconds: float, stop: threading.Event) -> int:
    """About `rate` events a second for `seconds`, in ticks of 0.1 s."""
    from deliveries.services import EventInput, events_publish
    from endpoints.models import Merchant

    merchant = Merchant.objects.get(slug="bench")
    tick, sent, began = 0.1, 0, time.monotonic()
    while not stop.is_set() and time.monotonic() - began < seconds:
        due = int((time.monotonic() - began) * rate) - sent
        if due > 0:
            events_publish(
                merchant=merchant,
                events=[
                    EventInput("order.paid", bench.sample_data(sent + i))
                    for i in range(due)
                ],
            )
            sent += due
        time.sleep(tick)
    return sent


def unfinished() -> int:
    from deliveries.models import Delivery

    return Delivery.objects.filter(status__in=["pending", "delivering"]).count()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument("--rate", type=float, default=50.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--kill-every", type=float, default=8.0)
    parser.add_argument("--dispatchers", type=int, default=3)
    parser.add_argument("--dead-after", type=float, default=None)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    bench.database_prepare(args.database_url)
    bench.django_setup(args.database_url)
    receiver = bench.ReceiverProcess(["--port", "0", "--mix"])
    fleet = Fleet(db_url=args.database_url, dead_after=args.dead_after)
    rand = random.Random(args.seed)
    stop = threading.Event()
    try:
        bench.relay_reset(base=receiver.base, endpoints=ENDPOINTS)
        receiver.reset()
        for _ in range(args.dispatchers):
            fleet.start()
        published: list[int] = []
        publisher = threading.Thread(
            target=lambda: published.append(publish(args.rate, args.seconds, stop))
        )
        began = time.monotonic()
        publisher.start()
        kills, last_kill = 0, began
        while time.monotonic() - began + args.kill_every <= args.seconds:
            time.sleep(args.kill_every)
            fleet.kill_one(rand)
            last_kill = time.monotonic()
            kills += 1
            fleet.start()
        publisher.join()
        published_at = time.monotonic()
        while unfinished():
            if time.monotonic() - published_at > args.timeout:
                print(f"timed out with {unfinished()} deliveries unfinished")
                return 1
            time.sleep(0.05)
        done = time.monotonic()
        report(
            args,
            published=published[0] if published else 0,
            kills=kills,
            after_last_kill=done - last_kill,
            after_publish=done - published_at,
            received=receiver.dump(),
        )
    finally:
        stop.set()
        fleet.stop()
        receiver.stop()
    return 0


def report(args, *, published, kills, after_last_kill, after_publish, received):
    from django.db.models import Count

    from deliveries.models import Attempt, Delivery
    from deliveries.ops import counters

    totals = counters.counter_totals()
    copies = Counter((path, wid) for path, wid, _ in received)
    statuses = dict(
        Delivery.objects.values_list("status").annotate(n=Count("id")).order_by()
    )
    lines = [
        f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}",
        f"load average at the end: {os.getloadavg()}",
        f"events published: {published} ({args.rate:g}/s for {args.seconds:g} s),"
        f" deliveries: {sum(statuses.values())} {statuses}",
        f"dispatchers killed: {kills} (one every {args.kill_every:g} s)",
        f"from the last kill to every delivery finished: {after_last_kill:.1f} s",
        f"from the end of publishing to every delivery finished: {after_publish:.1f} s",
        f"received: {len(copies)} distinct, {sum(copies.values()) - len(copies)}"
        " duplicates",
        f"lease_expired attempts: "
        f"{Attempt.objects.filter(error_kind='lease_expired').count()}",
        f"reclaimed: {totals.get((counters.RECLAIMED, ''), 0):.0f}, declared dead:"
        f" {totals.get((counters.DISPATCHERS_DEAD, ''), 0):.0f}, released from them:"
        f" {totals.get((counters.DEAD_DISPATCHER_RELEASED, ''), 0):.0f}",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
