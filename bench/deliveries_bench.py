"""Delivery throughput and latency of run_dispatcher on PostgreSQL (issue 2, item 10).

For each scenario: empty the relay tables of its own database, make M
endpoints on a loopback receiver (bench/receiver.py, its own process),
publish N events through deliveries.services.events_publish, start K
`manage.py run_dispatcher --drain` processes and wait for them. The receiver
records when each (endpoint path, webhook-id) arrived; latency is that time
minus the event's created_at, throughput is deliveries over the span from the
first to the last receipt (process start-up is reported apart, as "wall").
The ceiling is the same number of plain aiohttp POSTs to the same receiver,
512 in flight, with no database (bench/ceiling.py). Three receivers: instant
(2 endpoints), a fixed 100 ms and issue 8's realistic latency mix (20
endpoints each). The steady scenario publishes at half the throughput of
"instant default k=1". Peak RSS is each dispatcher's VmHWM; the load average
is recorded with every row (the machine is shared).

    .venv/bin/python bench/deliveries_bench.py            # full run, ~10 min
    .venv/bin/python bench/deliveries_bench.py --quick    # smoke run, ~1 min

Loopback only; every scenario is bounded by --timeout. Results go to stdout
as a markdown table and to bench/out/results-<time>.json.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
# The project tree whose engine is measured; set by main(). By default a
# clean export of the committed HEAD, so that work in progress in a shared
# checkout neither breaks the run nor gets measured by mistake.
ROOT = HERE.parent
PYTHON = sys.executable
PY_SPY = ""  # path to a py-spy binary: profile every dispatcher (set by --py-spy)
# Only the thread holding the GIL: where the process's one core of Python goes
# (without it, a thread waiting for the GIL is sampled where it waits).
PY_SPY_GIL = False
SAMPLE = False  # profile every dispatcher with bench/sampler.py (set by --sample)
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/bench_relay"


@dataclass
class Scenario:
    name: str
    receiver: str  # a key of RECEIVERS
    concurrency: int | None  # None: the default (DISPATCHER_CONCURRENCY)
    processes: int
    events: int
    steady_rate: float = 0.0  # events/s published while dispatchers run; 0 = backlog
    batch_size: int | None = None  # None: the default (BATCH_SIZE)


# name: (receiver.py arguments, endpoints subscribed). The instant receiver
# keeps the 2 endpoints of earlier runs; the slow ones get 20 so that the
# per-endpoint cap (ENDPOINT_MAX_IN_FLIGHT, 32) is not what is measured.
RECEIVERS = {
    "instant": (["--delay", "0"], 2),
    # Issue 21's own measure: an instant receiver behind 20 endpoints, so the
    # per-endpoint cap leaves 640 slots and the dispatcher is what is timed.
    "instant20": (["--delay", "0"], 20),
    "100ms": (["--delay", "0.1"], 20),
    "mix": (["--mix"], 20),
    # Every answer takes 5 s: what holds 512 sends in flight for the memory
    # figure (the mix's short answers empty the pipe faster than claims fill it).
    "5s": (["--delay", "5"], 20),
}


@dataclass
class Result:
    name: str
    kind: str
    deliveries: int
    received: int
    duplicates: int
    rate: float  # deliveries/s, first to last receipt
    wall: float  # seconds from starting the dispatchers to the last receipt
    p50_ms: float | None = None
    p90_ms: float | None = None  # for bench/report.py's plots
    p95_ms: float | None = None
    p99_ms: float | None = None
    peak_in_flight: int | None = None  # most requests the receiver held at once
    rss_mb: float | None = None  # peak resident memory of the largest dispatcher
    # CPU seconds (user + system) of all dispatchers together, last seen alive:
    # against the wall time, how much of a core the engine had.
    cpu_s: float | None = None
    load: str = ""  # 1/5/15 min load average when the scenario ended
    notes: list[str] = field(default_factory=list)


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


# -- processes -----------------------------------------------------------------


class ReceiverProcess:
    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, str(HERE / "receiver.py"), *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        # "port N", and more ports after it with --tls-dir.
        self.first_line = self.proc.stdout.readline()
        line = self.first_line.split()
        self.port = int(line[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        requests.post(f"{self.base}/_reset", timeout=10)

    def peak(self) -> int:
        return requests.get(f"{self.base}/_peak", timeout=10).json()

    def dump(self) -> list[tuple[str, str, float]]:
        return [tuple(x) for x in requests.get(f"{self.base}/_dump", timeout=30).json()]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


# Production settings (DEBUG off), one key for the whole run.
SECRETS = {
    "DEBUG": "false",
    "SECRET_KEY": "bench-" + uuid.uuid4().hex * 2,
    "ALLOWED_HOSTS": "127.0.0.1",
}


def dispatcher_env(db_url: str) -> dict[str, str]:
    env = dict(os.environ)
    if "RELAY_ENCRYPTION_KEYS" not in SECRETS:
        SECRETS["RELAY_ENCRYPTION_KEYS"] = fernet_key()
    env.update(SECRETS)
    env.update(DATABASE_URL=db_url, RELAY_ALLOW_PRIVATE_DESTINATIONS="true")
    # Everything else at its contract default: the bench measures those.
    for name in ("BATCH_SIZE", "DISPATCHER_CONCURRENCY", "CLAIM_LEASE_SECONDS"):
        env.pop(name, None)
    return env


def start_dispatchers(
    s: Scenario, *, db_url: str, drain: bool
) -> list[subprocess.Popen]:
    OUT.mkdir(exist_ok=True)
    procs = []
    for k in range(s.processes):
        slug = re.sub(r"[^A-Za-z0-9=]+", "-", s.name)
        log = open(OUT / f"{slug}-{k}.log", "w")  # noqa: SIM115 - closed with the process
        cmd = [
            PYTHON,
            "manage.py",
            "run_dispatcher",
            # The engine is under test, not the URL map: a half-committed
            # page elsewhere in the tree must not stop the run.
            "--skip-checks",
        ]
        if s.concurrency is not None:
            cmd += ["--concurrency", str(s.concurrency)]
        if s.batch_size is not None:
            cmd += ["--batch-size", str(s.batch_size)]
        cmd += ["--worker-id", f"bench-{k}"] + (["--drain"] if drain else [])
        if SAMPLE:
            # Wall-clock stacks of every thread (bench/sampler.py --report).
            out = OUT / f"{slug}-{k}.samples.txt"
            cmd = [PYTHON, str(HERE / "sampler.py"), "-o", str(out), "--", *cmd[1:]]
        elif PY_SPY:
            # On-CPU samples only, as collapsed stacks: where the CPU goes.
            out = OUT / f"{slug}-{k}.pyspy.txt"
            cmd = [
                PY_SPY,
                "record",
                "--format",
                "raw",
                "-r",
                "250",
                *(["--gil"] if PY_SPY_GIL else []),
                "-o",
                str(out),
                "--",
                *cmd,
            ]
        procs.append(
            subprocess.Popen(
                cmd, cwd=ROOT, env=dispatcher_env(db_url), stdout=log, stderr=log
            )
        )
    return procs


class RssWatch:
    """Peak resident memory (VmHWM) of each process, read twice a second until it ends."""

    def __init__(self, procs: list[subprocess.Popen]) -> None:
        self.peak: dict[int, float] = {}
        self.cpu: dict[int, float] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self.procs = procs
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while any(p.poll() is None for p in self.procs):
            for p in self.procs:
                try:
                    status = Path(f"/proc/{p.pid}/status").read_text()
                except OSError:
                    continue
                m = re.search(r"VmHWM:\s+(\d+) kB", status)
                if m:
                    self.peak[p.pid] = int(m.group(1)) / 1024
                try:
                    # After the command name (in parentheses): utime, stime
                    # are fields 14 and 15 of /proc/<pid>/stat.
                    stat = Path(f"/proc/{p.pid}/stat").read_text()
                    fields = stat.rsplit(")", 1)[1].split()
                    self.cpu[p.pid] = (int(fields[11]) + int(fields[12])) / self._tick
                except (OSError, IndexError, ValueError):
                    pass
            time.sleep(0.5)

    def cpu_seconds(self) -> float | None:
        return sum(self.cpu.values()) if self.cpu else None

    def result(self) -> float | None:
        self.thread.join(2)
        return max(self.peak.values()) if self.peak and not PY_SPY else None


def stop_gracefully(proc: subprocess.Popen) -> None:
    """SIGTERM the dispatcher; under py-spy, its child, so that py-spy sees
    its target end and writes the profile (a SIGTERM would kill py-spy)."""
    if not PY_SPY:
        proc.send_signal(signal.SIGTERM)
        return
    for task in Path(f"/proc/{proc.pid}/task").glob("*/children"):
        for child in task.read_text().split():
            os.kill(int(child), signal.SIGTERM)


def load_now() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def stop_all(procs: list[subprocess.Popen], *, deadline: float) -> list[str]:
    """Wait for each process until the deadline, then kill it; say what happened."""
    notes = []
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            notes.append(f"pid {proc.pid} killed at the timeout")
        if proc.returncode not in (0, -9):
            notes.append(f"pid {proc.pid} exited {proc.returncode}")
    return notes


# -- database ------------------------------------------------------------------


def tree_export(rev: str) -> tuple[Path, str]:
    """git archive `rev` into bench/out/src-<sha>/ (once) and return it with the sha."""
    sha = subprocess.run(
        ["git", "rev-parse", rev], cwd=HERE, capture_output=True, text=True, check=True
    ).stdout.strip()
    dest = OUT / f"src-{sha[:12]}"
    if not (dest / "manage.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", sha], cwd=HERE.parent, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest, sha


def database_prepare(db_url: str) -> None:
    """Create the bench database if missing and migrate it (its own, never test_*)."""
    import psycopg

    name = db_url.rsplit("/", 1)[1]
    admin = db_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [PYTHON, "manage.py", "migrate", "--noinput", "-v", "0", "--skip-checks"],
        cwd=ROOT,
        env=dispatcher_env(db_url),
        check=True,
    )


def django_setup(db_url: str) -> None:
    os.environ.update(dispatcher_env(db_url))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def tables_empty() -> None:
    from django.apps import apps
    from django.db import connection

    tables = [
        m._meta.db_table
        for label in ("deliveries", "endpoints")
        for m in apps.get_app_config(label).get_models()
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")


def relay_reset(*, base: str, endpoints: int) -> None:
    """Empty tables, then one merchant with `endpoints` endpoints at base/e<i>."""
    from endpoints.merchant_services import merchant_create
    from endpoints.services import endpoint_create

    tables_empty()
    merchant = merchant_create(slug="bench", name="Bench")
    # One merchant, so its own cap (MERCHANT_MAX_IN_FLIGHT) is raised out of
    # the way: the figures measure the dispatchers, comparable with older rows.
    # (A commit from before the cap has no such field: --rev measures it too.)
    if any(f.name == "max_in_flight" for f in merchant._meta.fields):
        merchant.max_in_flight = 100_000
        merchant.save(update_fields=["max_in_flight"])
    # Since issue 20 the service takes the time from its caller; older commits
    # (measured with --rev) read their own clock.
    takes_now = "now" in inspect.signature(endpoint_create).parameters
    clock = {"now": datetime.now(UTC)} if takes_now else {}
    for i in range(endpoints):
        endpoint_create(merchant=merchant, url=f"{base}/e{i}", **clock)


def events_make(count: int, *, chunk: int = 500) -> None:
    from deliveries.services import EventInput, events_publish
    from endpoints.models import Merchant

    merchant = Merchant.objects.get(slug="bench")
    for start in range(0, count, chunk):
        events_publish(
            merchant=merchant,
            events=[
                EventInput("order.paid", sample_data(i))
                for i in range(start, min(start + chunk, count))
            ],
        )


def sample_data(i: int) -> dict:
    return {"order_id": i, "amount": 1999, "currency": "EUR", "note": "x" * 120}


def created_at_by_event() -> dict[str, float]:
    from deliveries.models import Event

    return {
        pk: t.timestamp() for pk, t in Event.objects.values_list("id", "created_at")
    }


def status_counts() -> dict[str, int]:
    from django.db.models import Count

    from deliveries.models import Delivery

    rows = Delivery.objects.values("status").annotate(n=Count("id"))
    return {r["status"]: r["n"] for r in rows}


def analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


# -- measuring -----------------------------------------------------------------


def summarise(
    name: str,
    kind: str,
    *,
    expected: int,
    received: list[tuple[str, str, float]],
    started: float,
    created: dict[str, float] | None,
) -> Result:
    keys = {(path, wid) for path, wid, _ in received}
    times = sorted(t for _, _, t in received)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    result = Result(
        name=name,
        kind=kind,
        deliveries=expected,
        received=len(keys),
        duplicates=len(received) - len(keys),
        rate=(len(times) - 1) / span if span else 0.0,
        wall=(times[-1] - started) if times else 0.0,
    )
    if created:
        first = {}
        for path, wid, t in received:
            first[(path, wid)] = min(t, first.get((path, wid), t))
        latencies = [(t - created[wid]) * 1000 for (_, wid), t in first.items()]
        result.p50_ms, result.p90_ms, result.p95_ms, result.p99_ms = (
            percentile(latencies, p) for p in (50, 90, 95, 99)
        )
    if result.received != expected:
        result.notes.append(f"received {result.received} of {expected}")
    return result


def run_backlog(
    s: Scenario, receiver: ReceiverProcess, *, db_url: str, m: int, timeout: float
) -> Result:
    """N events published first, then K dispatchers drain them: throughput."""
    relay_reset(base=receiver.base, endpoints=m)
    events_make(s.events)
    analyze()
    receiver.reset()
    started = time.time()
    procs = start_dispatchers(s, db_url=db_url, drain=True)
    rss = RssWatch(procs)
    notes = stop_all(procs, deadline=time.monotonic() + timeout)
    result = summarise(
        s.name,
        "relay",
        expected=s.events * m,
        received=receiver.dump(),
        started=started,
        created=created_at_by_event(),
    )
    statuses = status_counts()
    if statuses.get("succeeded") != s.events * m:
        notes.append(f"statuses {statuses}")
    result.notes += notes
    result.rss_mb, result.load = rss.result(), load_now()
    result.cpu_s = rss.cpu_seconds()
    result.peak_in_flight = receiver.peak()
    return result


def run_steady(
    s: Scenario, receiver: ReceiverProcess, *, db_url: str, m: int, timeout: float
) -> Result:
    """Dispatchers idle on LISTEN; events arrive at a fixed rate; latency is the point."""
    relay_reset(base=receiver.base, endpoints=m)
    procs = start_dispatchers(s, db_url=db_url, drain=False)
    rss = RssWatch(procs)
    deadline = time.monotonic() + timeout
    # Warm-up: wait until a dispatcher has delivered one event, then a moment
    # for the others to reach their LISTEN.
    events_make(1)
    while len(receiver.dump()) < m and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)
    warmup_ids = created_at_by_event()
    receiver.reset()
    started = time.time()
    # One publish (one transaction, one NOTIFY) per event, as one POST per
    # event would, paced on a 10 ms tick so that no burst queues behind itself.
    tick = 0.01
    sent, owed = 0, 0.0
    next_at = time.monotonic()
    while sent < s.events and time.monotonic() < deadline:
        owed += s.steady_rate * tick
        while owed >= 1 and sent < s.events:
            events_make(1)
            sent, owed = sent + 1, owed - 1
        next_at += tick
        time.sleep(max(0.0, next_at - time.monotonic()))
    expected = s.events * m
    while len(receiver.dump()) < expected and time.monotonic() < deadline:
        time.sleep(0.2)
    for proc in procs:
        stop_gracefully(proc)
    notes = stop_all(procs, deadline=time.monotonic() + 30)
    created = {k: v for k, v in created_at_by_event().items() if k not in warmup_ids}
    received = [r for r in receiver.dump() if r[1] in created]
    result = summarise(
        s.name,
        "relay",
        expected=expected,
        received=received,
        started=started,
        created=created,
    )
    result.notes += notes
    result.rss_mb, result.load = rss.result(), load_now()
    result.cpu_s = rss.cpu_seconds()
    result.peak_in_flight = receiver.peak()
    return result


def run_ceiling(
    name: str, receiver: ReceiverProcess, *, count: int, in_flight: int, m: int
) -> Result:
    """Plain aiohttp POSTs, in_flight at once, no database, no signing (bench/ceiling.py)."""
    from ceiling import ceiling_run

    receiver.reset()
    ids = [f"evt_ceiling{i:07d}" for i in range(count)]
    started = time.time()
    ceiling_run(receiver.base, ids=ids, endpoints=m, in_flight=in_flight)
    result = summarise(
        name,
        "ceiling",
        expected=count,
        received=receiver.dump(),
        started=started,
        created=None,
    )
    result.load = load_now()
    result.peak_in_flight = receiver.peak()
    return result


# -- the run -------------------------------------------------------------------


def scenarios(*, events: int, slow_events: int, steady_events: int) -> list[Scenario]:
    """Backlog sizes in events; each event is one delivery per endpoint."""
    mix = max(10, slow_events // RECEIVERS["mix"][1])
    slow = max(10, slow_events // RECEIVERS["100ms"][1])
    return [
        Scenario("mix default k=1", "mix", None, 1, mix),
        Scenario("mix default k=2", "mix", None, 2, mix),
        Scenario("mix c=512 k=1", "mix", 512, 1, mix * 2),
        Scenario("mix c=1 k=1", "mix", 1, 1, 5),
        # The defaults before issue 21 (concurrency 256, claims of 50).
        Scenario("mix c=256 batch=50 k=1", "mix", 256, 1, mix, batch_size=50),
        Scenario("5s c=512 k=1", "5s", 512, 1, 100),
        Scenario("instant default k=1", "instant", None, 1, events),
        Scenario("instant default k=2", "instant", None, 2, events),
        Scenario("instant c=1 k=1", "instant", 1, 1, max(10, events // 4)),
        Scenario(
            "instant c=256 batch=50 k=1", "instant", 256, 1, events, batch_size=50
        ),
        Scenario("instant20 default k=1", "instant20", None, 1, max(10, events // 2)),
        Scenario("instant20 default k=2", "instant20", None, 2, max(10, events // 2)),
        Scenario("100ms default k=1", "100ms", None, 1, slow),
        Scenario("100ms default k=2", "100ms", None, 2, slow),
        Scenario("100ms c=1 k=1", "100ms", 1, 1, 5),
        # The rate is set from "instant default k=1" (half its throughput).
        Scenario("steady instant default k=1", "instant", None, 1, steady_events, 1),
    ]


def machine() -> dict[str, str]:
    def sh(cmd: str) -> str:
        return subprocess.run(
            cmd, shell=True, capture_output=True, text=True
        ).stdout.strip()

    return {
        "nproc": sh("nproc"),
        "cpu": sh("lscpu | grep 'Model name' | sed 's/.*: *//'"),
        "memory": sh("free -h | awk '/Mem:/ {print $2}'"),
        "postgres": sh("psql -h 127.0.0.1 -U postgres -Atc 'SHOW server_version'"),
        "python": platform.python_version(),
        "load_before": sh("cut -d' ' -f1-3 /proc/loadavg"),
    }


def table(results: list[Result]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    lines = [
        "| scenario | kind | deliveries | received | dups | deliveries/s | wall s | p50 ms | p95 ms | p99 ms | peak in flight | peak RSS MB | CPU s | load | notes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        rss = "-" if r.rss_mb is None else f"{r.rss_mb:.0f}"
        cpu = "-" if r.cpu_s is None else f"{r.cpu_s:.1f}"
        lines.append(
            f"| {r.name} | {r.kind} | {r.deliveries} | {r.received} | {r.duplicates} | "
            f"{r.rate:.0f} | {r.wall:.1f} | {ms(r.p50_ms)} | {ms(r.p95_ms)} | {ms(r.p99_ms)} | "
            f"{r.peak_in_flight} | {rss} | {cpu} | {r.load} | {'; '.join(r.notes)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="webhook-relay delivery benchmark")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument(
        "--events", type=int, default=2000, help="events per fast scenario"
    )
    parser.add_argument(
        "--slow-events", type=int, default=3000, help="deliveries per slow backlog"
    )
    parser.add_argument("--steady-events", type=int, default=2000)
    parser.add_argument(
        "--steady-rates",
        default="",
        help="steady scenario at these rates instead, events/s, e.g. 50,200,500",
    )
    parser.add_argument(
        "--only",
        default="",
        help="run scenarios whose name contains this (or any of these, comma-separated)",
    )
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds per scenario"
    )
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument(
        "--rev", default="HEAD", help="commit whose engine to measure (exported clean)"
    )
    parser.add_argument(
        "--tree", default="", help="measure this project tree as it is instead"
    )
    parser.add_argument(
        "--py-spy", default="", help="py-spy binary: profile dispatchers"
    )
    parser.add_argument(
        "--py-spy-gil",
        action="store_true",
        help="with --py-spy: sample only the thread holding the GIL",
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="profile dispatchers with bench/sampler.py (wall clock, all threads)",
    )
    args = parser.parse_args(argv)
    global ROOT, PY_SPY, PY_SPY_GIL, SAMPLE
    PY_SPY, PY_SPY_GIL, SAMPLE = args.py_spy, args.py_spy_gil, args.sample
    if args.tree:
        ROOT, sha = Path(args.tree).resolve(), f"tree {args.tree}"
    else:
        ROOT, sha = tree_export(args.rev)
    if args.quick:
        args.events, args.slow_events, args.steady_events = 200, 400, 100
    if not args.database_url.rsplit("/", 1)[1].startswith("bench"):
        parser.error("use a database of its own whose name starts with 'bench'")

    info = machine()
    info["commit"] = sha
    database_prepare(args.database_url)
    django_setup(args.database_url)
    receivers = {name: ReceiverProcess(cmd) for name, (cmd, _) in RECEIVERS.items()}
    results: list[Result] = []
    plan = scenarios(
        events=args.events,
        slow_events=args.slow_events,
        steady_events=args.steady_events,
    )
    try:
        if not args.no_ceiling:
            for name, (_, m) in RECEIVERS.items():
                wanted = [s for s in plan if s.receiver == name]
                count = max(s.events * m for s in wanted) if wanted else 1000
                results.append(
                    run_ceiling(
                        f"{name} ceiling 512 in flight",
                        receivers[name],
                        count=max(count, 1000),
                        in_flight=512,
                        m=m,
                    )
                )
                print(table(results[-1:]).splitlines()[-1], flush=True)
        for s in plan:
            if args.only and not any(o in s.name for o in args.only.split(",")):
                continue
            m = RECEIVERS[s.receiver][1]
            runs = [s]
            if s.steady_rate and args.steady_rates:
                # Issue 21's rates, in events/s (each event one delivery per endpoint).
                runs = [
                    Scenario(**{**asdict(s), "steady_rate": float(rate)})
                    for rate in args.steady_rates.split(",")
                ]
                for run_s in runs:
                    run_s.name += f" at {run_s.steady_rate:g} events/s"
            elif s.steady_rate:
                # Half the measured throughput of one default dispatcher, in events/s.
                base = [r for r in results if r.name == "instant default k=1"]
                rate = base[0].rate / 2 if base else 200.0
                s.steady_rate = rate / m
                s.name += f" at {rate:.0f} deliveries/s"
            for run_s in runs:
                run = run_steady if run_s.steady_rate else run_backlog
                results.append(
                    run(
                        run_s,
                        receivers[run_s.receiver],
                        db_url=args.database_url,
                        m=m,
                        timeout=args.timeout,
                    )
                )
                print(table(results[-1:]).splitlines()[-1], flush=True)
    finally:
        for r in receivers.values():
            r.stop()
    results_report("results", info=info, args=args, results=results)
    return 0


def drained_result(
    name: str,
    kind: str,
    *,
    expected: int,
    received: list,
    started: float,
    notes: list[str],
    watch: RssWatch,
    peak: int | None,
) -> Result:
    """One drained backlog measured: the receipts summarised, a note when
    not every delivery succeeded, and the dispatcher's memory, CPU and load."""
    result = summarise(
        name,
        kind,
        expected=expected,
        received=received,
        started=started,
        created=created_at_by_event(),
    )
    statuses = status_counts()
    if statuses.get("succeeded") != expected:
        notes.append(f"statuses {statuses}")
    result.notes += notes
    result.rss_mb, result.load = watch.result(), load_now()
    result.cpu_s = watch.cpu_seconds()
    result.peak_in_flight = peak
    return result


def results_report(
    prefix: str,
    *,
    info: dict,
    args: argparse.Namespace,
    results: list,
    table_of: Callable[[list], str] | None = None,
) -> Path:
    """Print the machine line and the table (`table_of`, for a bench whose
    results are not Result rows), and keep them with the args in
    OUT/<prefix>-<time>.json (every bench of the relay ends so)."""
    info["load_after"] = machine()["load_before"]
    print()
    print(" ".join(f"{k}={v}" for k, v in info.items()))
    print((table_of or table)(results))
    OUT.mkdir(exist_ok=True)
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    path = OUT / f"{prefix}-{stamp}.json"
    path.write_text(
        json.dumps(
            {
                "machine": info,
                "args": vars(args),
                "results": [asdict(r) for r in results],
            },
            indent=2,
        )
    )
    print(f"\nwritten {path}")
    return path


if __name__ == "__main__":
    sys.exit(main())
