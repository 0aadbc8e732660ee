"""Deliveries/s per destination kind (issue 41): one dispatcher, one run, HTTP
on the instant receiver beside RabbitMQ, NATS JetStream, Redis Streams and
MQTT on loopback.

For each kind, as bench/deliveries_bench.py does for its instant20 scenario:
empty the relay tables of the bench database, make ENDPOINTS endpoints of
that kind, publish N events (one delivery per endpoint each), start one
`manage.py run_dispatcher --drain` and wait for it. HTTP endpoints post to
bench/receiver.py with no delay; broker endpoints publish to a queue,
subject, stream or topic of their own on the broker, named with the run's
id, where bench/broker_consumer.py (its own process, as the receiver is)
takes each message as it arrives. Deliveries/s is the span from the first to
the last arrival, as in deliveries_bench; CPU s is the dispatcher's. Kinds
run one after the other, in the order given, --rounds times (alternated, so
a machine whose speed moves shows it).

    .venv/bin/python -m bench.brokers_bench                # 1,000 events a kind
    .venv/bin/python -m bench.brokers_bench --quick        # 100 events a kind
    .venv/bin/python -m bench.brokers_bench --tree . --kinds http,redis --events 50

The brokers are those of the test suite (RabbitMQ, NATS with JetStream,
Redis, Mosquitto on 127.0.0.1), named by --<kind>-url. Results go to stdout
as a markdown table and to bench/out/brokers-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from bench import deliveries_bench as relay_bench
from bench.broker_consumer import KINDS as BROKER_KINDS
from bench.broker_consumer import targets

HERE = Path(__file__).resolve().parent
ENDPOINTS = 20  # as instant20: the per-endpoint cap (32) leaves 640 sends in flight
BROKER_URLS = {
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/",
    "nats": "nats://127.0.0.1:4222",
    "redis": "redis://127.0.0.1:6379/0",
    "mqtt": "mqtt://127.0.0.1:1883",
}
# The dispatcher may publish to the loopback brokers only because the
# operator lists that address itself (endpoints/brokers.py).
BROKER_HOSTS = "127.0.0.1"
READY_SECONDS = 30.0  # a consumer that has not subscribed by then has failed


class ConsumerProcess:
    """bench/broker_consumer.py for one kind and one run, until finish()."""

    def __init__(self, kind: str, *, url: str, run_id: str, expect: int) -> None:
        self.proc = subprocess.Popen(
            [
                relay_bench.PYTHON,
                str(HERE / "broker_consumer.py"),
                kind,
                f"--url={url}",
                f"--run-id={run_id}",
                f"--endpoints={ENDPOINTS}",
                f"--expect={expect}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = _line_within(self.proc, READY_SECONDS)
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError(f"the {kind} consumer did not start: {line!r}")

    def finish(self, timeout: float) -> list[tuple[str, str, float]]:
        """Tell it the dispatcher is done; what it received, once it has all."""
        try:
            out, _ = self.proc.communicate(input="", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return []
        return [tuple(row) for row in json.loads(out or "[]")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _line_within(proc: subprocess.Popen, seconds: float) -> str:
    """proc's first line of output, or "" when it says nothing in time."""
    with selectors.DefaultSelector() as waiting:
        waiting.register(proc.stdout, selectors.EVENT_READ)
        if not waiting.select(seconds):
            return ""
    return proc.stdout.readline()


def endpoints_make(kind: str, *, url: str, run_id: str) -> None:
    """Empty tables, then the bench merchant with ENDPOINTS endpoints of kind."""
    from endpoints.merchant_services import merchant_create
    from endpoints.services import endpoint_create

    relay_bench.tables_empty()
    merchant = merchant_create(slug="bench", name="Bench")
    # One merchant: its own cap is out of the way, as in deliveries_bench.
    merchant.max_in_flight = 100_000
    merchant.save(update_fields=["max_in_flight"])
    now = datetime.now(UTC)
    for target in targets(kind, run_id, ENDPOINTS):
        endpoint_create(merchant=merchant, url=url, kind=kind, target=target, now=now)


def run_kind(
    kind: str,
    *,
    events: int,
    db_url: str,
    timeout: float,
    receiver: relay_bench.ReceiverProcess | None,
    broker_url: str,
) -> relay_bench.Result:
    """One kind: publish `events`, drain them with one dispatcher, measure."""
    name = f"{kind} k=1"
    expected = events * ENDPOINTS
    consumer = None
    try:
        if kind == "http":
            relay_bench.relay_reset(base=receiver.base, endpoints=ENDPOINTS)
        else:
            run_id = uuid.uuid4().hex[:12]
            endpoints_make(kind, url=broker_url, run_id=run_id)
            consumer = ConsumerProcess(
                kind, url=broker_url, run_id=run_id, expect=expected
            )
        relay_bench.events_make(events)
        relay_bench.analyze()
        if receiver is not None:
            receiver.reset()
        started = time.time()
        scenario = relay_bench.Scenario(name, kind, None, 1, events)
        procs = relay_bench.start_dispatchers(scenario, db_url=db_url, drain=True)
        watch = relay_bench.RssWatch(procs)
        notes = relay_bench.stop_all(procs, deadline=time.monotonic() + timeout)
        peak = None  # a broker holds no request open: only HTTP has a peak
        if consumer is not None:
            received = consumer.finish(timeout=60)
        else:
            received, peak = receiver.dump(), receiver.peak()
    finally:
        if consumer is not None:
            consumer.stop()
    return relay_bench.drained_result(
        name,
        kind,
        expected=expected,
        received=received,
        started=started,
        notes=notes,
        watch=watch,
        peak=peak,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(("http", *BROKER_KINDS)))
    parser.add_argument("--events", type=int, default=1000, help="events a kind")
    parser.add_argument("--quick", action="store_true", help="100 events a kind")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300, help="seconds a kind")
    parser.add_argument("--database-url", default=relay_bench.DEFAULT_DB)
    parser.add_argument(
        "--rev", default="HEAD", help="commit whose engine to measure (exported clean)"
    )
    parser.add_argument(
        "--tree", default="", help="measure this project tree as it is instead"
    )
    for kind, url in BROKER_URLS.items():
        parser.add_argument(f"--{kind}-url", default=url)
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - {"http", *BROKER_KINDS}
    if unknown:
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    if not args.database_url.rsplit("/", 1)[1].startswith("bench"):
        parser.error("use a database of its own whose name starts with 'bench'")
    if args.quick:
        args.events = 100
    if args.tree:
        relay_bench.ROOT, sha = Path(args.tree).resolve(), f"tree {args.tree}"
    else:
        relay_bench.ROOT, sha = relay_bench.tree_export(args.rev)
    # Read by the bench process (endpoint_create's save-time check) and, through
    # dispatcher_env, by the dispatchers (the same check at send).
    os.environ["RELAY_BROKER_HOSTS"] = BROKER_HOSTS
    os.environ["RELAY_BROKER_KINDS"] = ",".join(BROKER_KINDS)

    info = relay_bench.machine()
    info["commit"] = sha
    relay_bench.database_prepare(args.database_url)
    relay_bench.django_setup(args.database_url)
    receiver = (
        relay_bench.ReceiverProcess(["--delay", "0"]) if "http" in kinds else None
    )
    results: list[relay_bench.Result] = []
    try:
        for _ in range(args.rounds):
            for kind in kinds:
                results.append(
                    run_kind(
                        kind,
                        events=args.events,
                        db_url=args.database_url,
                        timeout=args.timeout,
                        receiver=receiver,
                        broker_url=getattr(args, f"{kind}_url", ""),
                    )
                )
                print(relay_bench.table(results[-1:]).splitlines()[-1], flush=True)
    finally:
        if receiver is not None:
            receiver.stop()
    relay_bench.results_report("brokers", info=info, args=args, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
