"""Ingest throughput through gunicorn on PostgreSQL, and in-process publish cost.

Not a test: a bounded run that measures, in one go and against the same
gunicorn, `GET /healthz` (the ceiling: one query a request), single
`POST /events`, idempotent `POST /events` (a fresh Idempotency-Key each),
`POST /events/batch` of 100, then `event_publish` in this process inside a
`transaction.atomic()`. A merchant with 2 endpoints, so each event writes 2
deliveries. It (re)creates its own database, so it never touches the
development or test databases.

    .venv/bin/python bench/api_load.py [--seconds 10] [--connections 8]
        [--workers 2] [--profile DIR] [--floor]

HTTP load comes from wrk (apt-get install wrk) when it is installed, else from
Python threads (which then compete with the server for the CPU). --profile
samples one gunicorn worker with py-spy (pip install py-spy) during the
single-publish and batch phases and prints where its time goes. --floor serves
bench/floor_wsgi.py and adds two phases: `POST /floor/events`, a publish with
nothing of Django's request handling around it (an experiment: what a publish
path outside Django could cost at best), and `POST /floor/empty`, the same
request answered without publishing. BENCH_DATABASE_URL defaults to
postgres://postgres@127.0.0.1:5432/bench_api.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
# An event or delivery id (replayed statements get fresh ones).
IDS = re.compile(r"\b(evt|dlv)_[0-9a-z]+")
PYTHON = sys.executable
PORT = 8765
SITE = f"http://127.0.0.1:{PORT}"
EVENT = {"merchant": "bench", "type": "order.created", "data": {"order": 42}}
# Issue 21's targets (the batch's was 10,000 here before that issue raised it).
TARGETS = {"single_vs_healthz": 0.5, "batch_events_per_s": 15_000, "inproc_p50_ms": 1.5}
# --profile: the phases whose first worker py-spy samples, and its output file.
PROFILED = {"POST /events": "single.txt", "POST /events/batch (100)": "batch.txt"}


def recreate_database(url: str) -> None:
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def manage(env: dict, *args: str) -> str:
    return subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def wait_until_up(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{SITE}/healthz", timeout=5).ok:
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        time.sleep(0.2)  # polling a starting server, not synchronising tests
    raise SystemExit("gunicorn did not come up")


# One Lua script per phase; each request of the idempotent phase carries a
# key of its own (thread id and a counter).
LUA = """
wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
local n = 0
local ids = 0
function setup(thread)
  ids = ids + 1
  thread:set("tid", ids)
end
{request}
"""
LUA_KEYED = """
function request()
  n = n + 1
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Idempotency-Key"] = "k-" .. tid .. "-" .. n
  return wrk.format(nil, nil, headers)
end
"""


def wrk_phase(*, path: str, seconds: float, connections: int, lua: str | None) -> dict:
    args = ["wrk", "--latency", "-t", "2", "-c", str(connections)]
    args += ["-d", f"{int(seconds)}s"]
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        if lua:
            script.write(lua)
            script.flush()
            args += ["-s", script.name]
        out = subprocess.run(
            [*args, SITE + path], capture_output=True, text=True, check=True
        ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    latency = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
    return {
        "requests/s": rate,
        "non-2xx": int(bad.group(1)) if bad else 0,
        "p50": latency.get("50"),
        "p99": latency.get("99"),
        "socket errors": errors.group(0) if errors else "",
    }


def thread_phase(
    *, path: str, seconds: float, connections: int, key: str, body, keyed: bool
) -> dict:
    stop = time.monotonic() + seconds
    latencies: list[float] = []
    bad = [0]
    lock = threading.Lock()

    def client(n: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {key}"
        mine: list[float] = []
        i = 0
        while time.monotonic() < stop:
            i += 1
            headers = {"Idempotency-Key": f"k-{n}-{i}"} if keyed else {}
            t0 = time.perf_counter()
            if body is None:
                response = session.get(SITE + path, timeout=30)
            else:
                response = session.post(
                    SITE + path, json=body, headers=headers, timeout=30
                )
            mine.append((time.perf_counter() - t0) * 1000)
            if response.status_code >= 300:
                with lock:
                    bad[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "requests/s": len(latencies) / seconds,
        "non-2xx": bad[0],
        "p50": f"{q[49]:.2f}ms",
        "p99": f"{q[98]:.2f}ms",
    }


def cpu_seconds(names: tuple[str, ...], parent: int | None = None) -> float:
    """User + system CPU seconds so far of the processes with one of these
    command names (and this parent, when given), from /proc."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it ended meanwhile
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if name in names and (parent is None or int(fields[1]) == parent):
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def http_phases(
    *,
    key: str,
    seconds: float,
    connections: int,
    before=lambda name: None,
    after=lambda name: None,
    floor: bool = False,
) -> dict[str, dict]:
    batch = {"events": [EVENT] * 100}
    phases = {
        "GET /healthz": ("/healthz", None, False),
        "POST /events": ("/api/v1/events", EVENT, False),
        **(
            {
                "POST /floor/events": ("/floor/events", EVENT, False),
                "POST /floor/empty": ("/floor/empty", EVENT, False),
            }
            if floor
            else {}
        ),
        "POST /events (Idempotency-Key)": ("/api/v1/events", EVENT, True),
        "POST /events/batch (100)": ("/api/v1/events/batch", batch, False),
    }
    results = {}
    use_wrk = shutil.which("wrk") is not None
    for name, (path, body, keyed) in phases.items():
        before(name)
        if use_wrk:
            lua = None
            if body is not None:
                lua = LUA.format(
                    body=json.dumps(json.dumps(body)),
                    key=key,
                    request=LUA_KEYED if keyed else "",
                )
            results[name] = wrk_phase(
                path=path, seconds=seconds, connections=connections, lua=lua
            )
        else:
            results[name] = thread_phase(
                path=path,
                seconds=seconds,
                connections=connections,
                key=key,
                body=body,
                keyed=keyed,
            )
        after(name)
    return results


def in_process(env: dict, *, count: int) -> dict:
    """event_publish inside transaction.atomic(), timed in this process, with
    its floors measured in the same loop (so under the same load): the very
    statement it sent, replayed by itself (the database's part, no Python),
    and a `SELECT 1` round trip. Then events_publish of 100 the same way."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection, transaction

    from deliveries.services import EventInput, event_publish, events_publish
    from endpoints.models import Merchant
    from relayproject.lib.ids import new_id

    merchant = Merchant.objects.get(slug="bench")
    db_seconds = [0.0]
    sent: list = []

    def timed(execute, sql, params, many, context):
        sent.append((sql, params))
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            db_seconds[0] += time.perf_counter() - t0

    def renamed(params: list) -> list:
        # The same rows under new ids (consistently: a delivery's event_id
        # follows its event), as the originals are stored now.
        fresh: dict[str, str] = {}

        def new(value):
            if isinstance(value, list):
                return [new(v) for v in value]
            if isinstance(value, str):
                # An id alone, or ids inside one array literal (the batch
                # statement sends its arrays as one string each).
                return IDS.sub(
                    lambda m: fresh.setdefault(m.group(0), new_id(m.group(1))), value
                )
            return value

        return [new(value) for value in params]

    def replayed(sql, params) -> float:
        params = renamed(params)
        with transaction.atomic():  # rolled back: the floor writes nothing
            with connection.cursor() as cursor:
                t0 = time.perf_counter()
                cursor.execute(sql, params)
                cursor.fetchall()
                took = time.perf_counter() - t0
            transaction.set_rollback(True)
        return took * 1000

    def round_trip() -> float:
        with connection.cursor() as cursor:
            t0 = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchall()
            return (time.perf_counter() - t0) * 1000

    def measure(publish, n: int) -> dict[str, list[float]]:
        runs: dict[str, list[float]] = {}
        for i in range(n + 20):
            db_seconds[0] = 0.0
            sent.clear()
            t0 = time.perf_counter()
            with connection.execute_wrapper(timed), transaction.atomic():
                t1 = time.perf_counter()
                publish(i)
                t2 = time.perf_counter()
            t3 = time.perf_counter()
            figures = {
                "call": (t2 - t1) * 1000,
                "in the database": db_seconds[0] * 1000,
                "with BEGIN/COMMIT": (t3 - t0) * 1000,
                "its statement replayed alone": replayed(*sent[-1]),
                "SELECT 1 round trip": round_trip(),
            }
            if i >= 20:  # warm-up left out
                for name, value in figures.items():
                    runs.setdefault(name, []).append(value)
        return runs

    def single(n: int) -> None:
        event = event_publish(merchant=merchant, type="order.created", data={"n": n})
        assert len(event.created_deliveries) == 2

    def batch(n: int) -> None:
        events = [EventInput("order.created", {"n": n, "i": i}) for i in range(100)]
        assert len(events_publish(merchant=merchant, events=events)) == 100

    def p(values: list[float], q: int) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1]

    results = {}
    for name, runs in (
        ("event_publish", measure(single, count)),
        ("events_publish of 100", measure(batch, max(count // 20, 50))),
    ):
        for figure, values in runs.items():
            results[f"{name}: {figure} p50/p99 ms"] = (p(values, 50), p(values, 99))
    return results


def start_profile(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    spy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    return subprocess.Popen(
        [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "200"]
        + ["--format", "raw", "-o", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def summarise_profile(path: Path, top: int = 25) -> None:
    """Inclusive share of samples per function, from py-spy's collapsed stacks."""
    inclusive: Counter = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        total += samples
        frames = {re.sub(r" \(.*?:\d+\)$", "", f) for f in stack.split(";")}
        for frame in frames:
            inclusive[frame] += samples
    print(f"\nprofile of one worker, {total} samples (inclusive %):")
    for frame, samples in inclusive.most_common(top):
        print(f"  {100 * samples / total:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--in-process", type=int, default=2000, dest="count")
    parser.add_argument("--profile", type=Path, help="directory for py-spy output")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="serve bench/floor_wsgi.py: add POST /floor/events and /floor/empty",
    )
    args = parser.parse_args()

    url = os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_api"
    )
    recreate_database(url)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "false",
        "SECRET_KEY": "bench-only-secret-key-not-for-production",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "false",
        "RELAY_ALLOW_PRIVATE_DESTINATIONS": "true",
        "RELAY_ENCRYPTION_KEYS": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "LOG_LEVEL": "WARNING",
        # The publish path is measured with its bucket statement, never refused
        # by it: one merchant publishes far past the default rate here.
        "PUBLISH_RATE_PER_MERCHANT": "1000000",
        "PUBLISH_BURST_PER_MERCHANT": "1000000",
    }
    env.pop("TEST_DATABASE_URL", None)
    manage(env, "migrate", "--noinput")
    key = manage(env, "create_api_key", "--name", "bench").strip().splitlines()[-1]
    server = subprocess.Popen(
        [PYTHON, "-m", "gunicorn"]
        + (["bench.floor_wsgi"] if args.floor else ["relayproject.wsgi"])
        + ["--bind", f"127.0.0.1:{PORT}", "--workers", str(args.workers)]
        + ["--log-level", "warning", "--no-control-socket"],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_until_up()
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {key}"
        session.post(f"{SITE}/api/v1/merchants", json={"slug": "bench", "name": "B"})
        for _ in range(2):  # fan-out to two endpoints, as a real merchant has
            session.post(
                f"{SITE}/api/v1/merchants/bench/endpoints",
                json={"url": "http://127.0.0.1:9/hook"},
            ).raise_for_status()
        # warm up
        http_phases(key=key, seconds=1, connections=args.connections, floor=args.floor)
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout
        print(f"before: {load.strip()}")
        print(
            f"gunicorn {args.workers} sync workers, {args.connections} connections, "
            f"{args.seconds:.0f} s a phase, wrk={'yes' if shutil.which('wrk') else 'no'}"
        )
        spies: list[subprocess.Popen] = []

        def profile(name: str) -> None:
            if args.profile and name in PROFILED:
                args.profile.mkdir(parents=True, exist_ok=True)
                workers = subprocess.run(
                    ["pgrep", "-P", str(server.pid)], capture_output=True, text=True
                ).stdout.split()
                out = args.profile / PROFILED[name]
                spies.append(start_profile(int(workers[0]), args.seconds, out))

        # What each phase cost: the gunicorn workers' CPU and every PostgreSQL
        # process's (its backends, WAL writer and the rest), per request.
        cpu: dict[str, tuple[float, float]] = {}

        def cpu_now() -> tuple[float, float]:
            workers = cpu_seconds(("gunicorn", "python", "python3"), server.pid)
            return workers, cpu_seconds(("postgres",))

        def start(name: str) -> None:
            profile(name)
            cpu[name] = cpu_now()

        def stop(name: str) -> None:
            now = cpu_now()
            cpu[name] = (now[0] - cpu[name][0], now[1] - cpu[name][1])

        results = http_phases(
            key=key,
            seconds=args.seconds,
            connections=args.connections,
            before=start,
            after=stop,
            floor=args.floor,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    for name, result in results.items():
        events = result["requests/s"] * (100 if "batch" in name else 1)
        print(
            f"{name:34} {result['requests/s']:9.1f} req/s {events:9.0f} events/s "
            f"p50 {result['p50']:>8} p99 {result['p99']:>8} "
            f"non-2xx {result['non-2xx']} {result.get('socket errors', '')}"
        )
    print("CPU ms a request (gunicorn workers / PostgreSQL; py-spy adds to the first):")
    for name, (web, database) in cpu.items():
        done = results[name]["requests/s"] * args.seconds
        print(f"  {name:34} {1000 * web / done:7.3f} / {1000 * database / done:7.3f}")
    inproc = in_process(env, count=args.count)
    for name, (p50, p99) in inproc.items():
        print(f"in-process {name}: {p50:.2f} / {p99:.2f}")
    ceiling = results["GET /healthz"]["requests/s"]
    single = results["POST /events"]["requests/s"]
    batch = results["POST /events/batch (100)"]["requests/s"] * 100
    p50 = inproc["event_publish: call p50/p99 ms"][0]
    if args.floor:
        floor = results["POST /floor/events"]["requests/s"]
        empty = results["POST /floor/empty"]["requests/s"]
        print(
            f"\nfloor / healthz = {floor / ceiling:.2f}, empty floor / healthz = "
            f"{empty / ceiling:.2f} (bench/floor_wsgi.py)"
        )
    print(
        f"\nsingle / healthz = {single / ceiling:.2f} (target "
        f">= {TARGETS['single_vs_healthz']}); batch events/s = {batch:.0f} (target "
        f">= {TARGETS['batch_events_per_s']}); in-process p50 = {p50:.2f} ms "
        f"(target < {TARGETS['inproc_p50_ms']})"
    )
    print(f"after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout}")
    for spy in spies:
        spy.wait(timeout=120)
    for name, file in PROFILED.items():
        if args.profile and (args.profile / file).exists():
            print(f"\n{name}:", end="")
            summarise_profile(args.profile / file)


if __name__ == "__main__":
    main()
