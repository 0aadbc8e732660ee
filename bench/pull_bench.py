"""Pull endpoints (issue 43): messages/s one consumer and four drain from one
pull endpoint through gunicorn, with the latency of each pull and ack.

For each pair of --workers and --consumers: empty the relay tables of the
bench database, make the bench merchant, a key scoped to it and one pull
endpoint (through the API, as a consumer's operator would), publish N
events (one delivery each), then start the consumers, each a process of its
own (bench/pull_consumer.py), at once. Each pulls `limit=100`, verifies
every message with the endpoint's secret and acks the batch, until the
relay has every delivery succeeded. A real web server serves them (gunicorn,
W sync workers, started once per W) and a real dispatcher runs the whole
time (it notices leases that run out; in a healthy run none does).

Messages/s is the acked messages over the span from the first pull to the
last ack; pull and ack latencies are each request as a consumer timed it.
CPU seconds are the gunicorn workers', their PostgreSQL backends', the
dispatcher's and the consumers' own during the drain. Then each consumer
polls the drained endpoint 100 times, one pull after the other: what an
idle consumer's poll costs, in latency and in web and PostgreSQL CPU per
pull. The load average is read when each run ends (the machine is shared).

    .venv/bin/python -m bench.pull_bench                  # 10,000 events; 2 and 4 workers
    .venv/bin/python -m bench.pull_bench --quick          # 500 events, 2 workers
    .venv/bin/python -m bench.pull_bench --tree . --workers 4 --consumers 1,4,8

Results go to stdout as a markdown table and to bench/out/pull-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import requests

from bench import deliveries_bench as relay_bench
from bench.pull_processes import (
    Consumer,
    WebServer,
    backend_pids,
    cpu_of,
    cpu_spent,
    dispatcher_wait,
)

LIMIT = 100  # messages a pull asks for: the most one pull hands out


@dataclass
class PullResult:
    name: str
    workers: int
    consumers: int
    events: int
    acked: int = 0
    duplicates: int = 0  # ids handed out more than once
    rate: float = 0.0  # messages/s, first pull to last ack
    wall: float = 0.0  # seconds, first pull to last ack
    pull_p50_ms: float | None = None
    pull_p95_ms: float | None = None
    ack_p50_ms: float | None = None
    ack_p95_ms: float | None = None
    # Polling the drained endpoint: each consumer's idle pulls one after the
    # other, their latency and the CPU each cost the web workers and
    # PostgreSQL (the dispatcher's backends, idle but for its upkeep, included).
    idle_p50_ms: float | None = None
    idle_web_cpu_ms: float | None = None
    idle_db_cpu_ms: float | None = None
    # CPU seconds during the drain: gunicorn workers, their PostgreSQL
    # backends, the dispatcher, the consumers.
    web_cpu_s: float | None = None
    db_cpu_s: float | None = None
    dispatcher_cpu_s: float | None = None
    consumers_cpu_s: float | None = None
    load: str = ""
    notes: list[str] = field(default_factory=list)


# -- the relay's side ----------------------------------------------------------


def pull_endpoint_make(server: WebServer) -> tuple[str, str, str]:
    """Empty tables, then the bench merchant, a key scoped to it and one pull
    endpoint made through the API: (key, endpoint id, signing secret)."""
    from endpoints.apikeys import apikey_create
    from endpoints.merchant_services import merchant_create

    relay_bench.tables_empty()
    merchant = merchant_create(slug="bench", name="Bench")
    _, key = apikey_create(name=f"bench-{uuid.uuid4().hex[:8]}", merchant=merchant)
    answer = requests.post(
        f"{server.base}/api/v1/merchants/bench/endpoints",
        json={"kind": "pull", "description": "bench consumer"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    if answer.status_code != 201:
        raise RuntimeError(f"no pull endpoint: {answer.status_code} {answer.text}")
    endpoint = answer.json()
    return key, endpoint["id"], endpoint["secret"]


def succeeded_count() -> int:
    from deliveries.models import Delivery

    return Delivery.objects.filter(status=Delivery.Status.SUCCEEDED).count()


def attempt_errors() -> dict[str, int]:
    from django.db.models import Count

    from deliveries.models import Attempt

    rows = Attempt.objects.exclude(error_kind="").values("error_kind")
    return {r["error_kind"]: r["n"] for r in rows.annotate(n=Count("id"))}


# -- one run -------------------------------------------------------------------


def run_drain(
    server: WebServer,
    *,
    consumers: int,
    events: int,
    db_url: str,
    timeout: float,
) -> PullResult:
    name = f"pull w={server.workers} c={consumers}"
    result = PullResult(name, server.workers, consumers, events)
    key, endpoint, secret = pull_endpoint_make(server)
    relay_bench.events_make(events)
    relay_bench.analyze()
    # Started on the emptied tables (its heartbeat row is among them), and
    # left running through the drain, as in production.
    dispatcher = relay_bench.start_dispatchers(
        relay_bench.Scenario(f"{name} dispatcher", "none", None, 1, events),
        db_url=db_url,
        drain=False,
    )[0]
    started: list[Consumer] = []
    try:
        dispatcher_wait(dispatcher)
        for _ in range(consumers):
            started.append(
                Consumer(
                    base=server.base,
                    key=key,
                    endpoint=endpoint,
                    secret=secret,
                    limit=LIMIT,
                )
            )
        drained, reports, cpu = drain(
            server,
            started,
            events=events,
            db_url=db_url,
            dispatcher=dispatcher,
            timeout=timeout,
        )
    finally:
        for consumer in started:
            consumer.stop()
        relay_bench.stop_gracefully(dispatcher)
        result.notes += relay_bench.stop_all(
            [dispatcher], deadline=time.monotonic() + 30
        )
    result.load = relay_bench.load_now()
    if drained < events:
        result.notes.append(f"{drained} of {events} succeeded by the timeout")
    if any(r is None for r in reports):
        result.notes.append("a consumer failed; see its stderr above")
    reports = [r for r in reports if r]
    result_fill(result, reports=reports, cpu=cpu)
    if errors := attempt_errors():
        result.notes.append(f"failed attempts {errors}")
    return result


def drain(
    server: WebServer,
    started: list[Consumer],
    *,
    events: int,
    db_url: str,
    dispatcher: subprocess.Popen,
    timeout: float,
) -> tuple[int, list[dict | None], tuple[tuple, tuple, tuple]]:
    """Start the consumers at once and wait for every delivery to succeed,
    then let them poll the drained endpoint and stop: (succeeded, the
    consumers' reports, CPU seconds before the drain, after it, after the
    idle pulls)."""
    web, backends = server.worker_pids(), backend_pids(db_url)
    cpu_before = (cpu_of(web), cpu_of(backends), cpu_of([dispatcher.pid]))
    for consumer in started:
        consumer.go()
    deadline = time.monotonic() + timeout
    while succeeded_count() < events and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the database for the end of the drain
    drained = succeeded_count()
    # The backends the drain opened count too (a worker's first connection).
    backends = sorted(set(backends) | set(backend_pids(db_url)))
    cpu_after = (cpu_of(web), cpu_of(backends), cpu_of([dispatcher.pid]))
    reports = [c.finish(timeout=60) for c in started]
    cpu_idle = (cpu_of(web), cpu_of(backends), cpu_of([dispatcher.pid]))
    return drained, reports, (cpu_before, cpu_after, cpu_idle)


def result_fill(result: PullResult, *, reports: list[dict], cpu: tuple) -> None:
    def p(values: list[float], q: float) -> float | None:
        return relay_bench.percentile(values, q) if values else None

    pulls = [ms for r in reports for ms in r["pull_ms"]]
    acks = [ms for r in reports for ms in r["ack_ms"]]
    ids = [i for r in reports for i in r["ids"]]
    result.acked = sum(r["acked"] for r in reports)
    result.duplicates = len(ids) - len(set(ids))
    starts = [r["first_at"] for r in reports if r["first_at"]]
    ends = [r["last_ack_at"] for r in reports if r["last_ack_at"]]
    if starts and ends:
        result.wall = max(ends) - min(starts)
        result.rate = result.acked / result.wall if result.wall else 0.0
    result.pull_p50_ms, result.pull_p95_ms = p(pulls, 50), p(pulls, 95)
    result.ack_p50_ms, result.ack_p95_ms = p(acks, 50), p(acks, 95)
    before, after, idle = cpu
    result.web_cpu_s, result.db_cpu_s, result.dispatcher_cpu_s = (
        cpu_spent(b, a) for a, b in zip(after, before, strict=True)
    )
    idle_pulls = [ms for r in reports for ms in r["idle_pull_ms"]]
    if idle_pulls:
        result.idle_p50_ms = p(idle_pulls, 50)
        result.idle_web_cpu_ms = cpu_spent(after[0], idle[0]) * 1000 / len(idle_pulls)
        result.idle_db_cpu_ms = cpu_spent(after[1], idle[1]) * 1000 / len(idle_pulls)
    result.consumers_cpu_s = sum(r["cpu_s"] for r in reports)
    rejected = sum(r["rejected"] for r in reports)
    unverified = sum(r["unverified"] for r in reports)
    late = sum(r.get("late_items", 0) for r in reports)
    for count, what in (
        (result.duplicates, "messages handed out more than once"),
        (rejected, "acks rejected"),
        (unverified, "messages failed verification"),
        (late, "messages handed out after the drain"),
    ):
        if count:
            result.notes.append(f"{count} {what}")
    if result.acked != result.events:
        result.notes.append(f"acked {result.acked} of {result.events}")


def table(results: list[PullResult]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        "| scenario | web workers | consumers | messages | acked | dups | messages/s | wall s | pull p50 / p95 ms | ack p50 / p95 ms | idle pull p50 ms, CPU ms web + PostgreSQL | CPU s: web / PostgreSQL / dispatcher / consumers | load | notes |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.workers} | {r.consumers} | {r.events} | {r.acked} | "
            f"{r.duplicates} | {r.rate:.0f} | {r.wall:.1f} | "
            f"{ms(r.pull_p50_ms)} / {ms(r.pull_p95_ms)} | "
            f"{ms(r.ack_p50_ms)} / {ms(r.ack_p95_ms)} | "
            f"{ms(r.idle_p50_ms)}, {ms(r.idle_web_cpu_ms)} + {ms(r.idle_db_cpu_ms)} | "
            f"{s(r.web_cpu_s)} / {s(r.db_cpu_s)} / {s(r.dispatcher_cpu_s)} / "
            f"{s(r.consumers_cpu_s)} | {r.load} | {'; '.join(r.notes)} |"
        )
    return "\n".join(lines)


def numbers(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=int, default=None, help="events a run (10,000; quick: 500)"
    )
    parser.add_argument("--quick", action="store_true", help="500 events, 2 workers")
    parser.add_argument("--workers", default="2,4", help="gunicorn workers, e.g. 2,4")
    parser.add_argument("--consumers", default="1,4", help="consumer processes")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run")
    parser.add_argument("--database-url", default=relay_bench.DEFAULT_DB)
    parser.add_argument("--out", default="", help="folder for logs and the JSON")
    parser.add_argument(
        "--rev", default="HEAD", help="commit whose relay to measure (exported clean)"
    )
    parser.add_argument(
        "--tree", default="", help="measure this project tree as it is instead"
    )
    args = parser.parse_args(argv)
    # Settings prefer a test database's URL to DATABASE_URL: never let one
    # reach this process or its children, whose tables the bench empties.
    for name in ("TEST_DATABASE_URL", "TEST_DATABASE_NAME"):
        os.environ.pop(name, None)
    if not args.database_url.rsplit("/", 1)[1].startswith("bench"):
        parser.error("use a database of its own whose name starts with 'bench'")
    if args.quick:
        args.workers = "2"
    if args.events is None:
        args.events = 500 if args.quick else 10_000
    if args.out:
        relay_bench.OUT = Path(args.out).resolve()
    if args.tree:
        relay_bench.ROOT, sha = Path(args.tree).resolve(), f"tree {args.tree}"
    else:
        relay_bench.ROOT, sha = relay_bench.tree_export(args.rev)
    info = relay_bench.machine()
    info["commit"] = sha
    relay_bench.database_prepare(args.database_url)
    relay_bench.django_setup(args.database_url)
    results: list[PullResult] = []
    for workers in numbers(args.workers):
        server = WebServer(workers=workers, db_url=args.database_url)
        try:
            for _ in range(args.rounds):
                for consumers in numbers(args.consumers):
                    results.append(
                        run_drain(
                            server,
                            consumers=consumers,
                            events=args.events,
                            db_url=args.database_url,
                            timeout=args.timeout,
                        )
                    )
                    print(table(results[-1:]).splitlines()[-1], flush=True)
        finally:
            server.stop()
    relay_bench.results_report(
        "pull", info=info, args=args, results=results, table_of=table
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"finished {stamp}")
    return 0 if all(r.acked == r.events and not r.notes for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
