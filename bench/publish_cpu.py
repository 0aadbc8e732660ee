"""CPU per request of the publish path, in-process: what the API costs in
Python, measured so that a busy machine moves it little.

Not a test. The project's WSGI application (relayproject.wsgi, so its
request receivers run, as under gunicorn) is called directly, with no socket,
for `GET /healthz`, a single `POST /api/v1/events` and a `POST
/api/v1/events/batch` of 100 (a merchant with 2 endpoints: 2 deliveries an
event). Each phase reports this process's CPU per request (its own Python
and libpq), the CPU of the PostgreSQL backend serving it (from /proc: the
server must run on this machine), wall time and the SQL statements sent.
Rates are left out on purpose: on a shared machine they
move with the load, CPU per request much less. It (re)creates its own
database (BENCH_DATABASE_URL, default .../bench_publish_cpu).

    .venv/bin/python bench/publish_cpu.py [--requests 2000] [--rounds 3]
        [--profile single|batch|healthz] [--top 40] [--only single,batch]
        [--unsettled]

--profile runs cProfile over that phase (CPU clock) and prints the functions
with the most own and cumulative time; --only runs just those phases (to
sample them with py-spy). Before the first request it does what
gunicorn.conf.py's post_worker_init does in a worker (load the URL map,
settle the collector); --unsettled leaves that out.
BENCH_DROP_MIDDLEWARE=part,part leaves out the middleware whose dotted path
contains a part, and BENCH_GUNICORN_ARGS adds to gunicorn's command line
(experiments).
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import psycopg

ROOT = Path(__file__).resolve().parent.parent
EVENT = {"merchant": "bench", "type": "order.created", "data": {"order": 42}}


def recreate_database(url: str) -> None:
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def prepare_environment(url: str) -> str:
    """Settings as a production web worker has them; returns an API key."""
    os.environ.update(
        DATABASE_URL=url,
        DEBUG="false",
        SECRET_KEY="bench-only-secret-key-not-for-production",
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="false",
        RELAY_ALLOW_PRIVATE_DESTINATIONS="true",
        RELAY_ENCRYPTION_KEYS=base64.urlsafe_b64encode(os.urandom(32)).decode(),
        LOG_LEVEL="WARNING",
        # The bucket statement runs on every publish but never refuses.
        PUBLISH_RATE_PER_MERCHANT="1000000",
        PUBLISH_BURST_PER_MERCHANT="1000000",
        DJANGO_SETTINGS_MODULE="relayproject.settings",
    )
    os.environ.pop("TEST_DATABASE_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run(
        [*manage, "migrate", "--noinput"], cwd=ROOT, check=True, capture_output=True
    )
    out = subprocess.run(
        [*manage, "create_api_key", "--name", "bench"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1]


def environ(method: str, path: str, key: str, body: bytes = b"") -> dict:
    return {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Bearer {key}",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", choices=["healthz", "single", "batch"])
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--only", help="comma-separated phases to run (say, under py-spy)"
    )
    parser.add_argument(
        "--unsettled",
        action="store_true",
        help="leave out what gunicorn.conf.py's post_worker_init does (the URL "
        "map loaded, the collector settled): to compare",
    )
    parser.add_argument(
        "--gunicorn",
        type=float,
        metavar="SECONDS",
        help="instead: one gunicorn sync worker under wrk -t1 -c4, SECONDS a phase",
    )
    args = parser.parse_args()

    url = os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_publish_cpu"
    )
    recreate_database(url)
    key = prepare_environment(url)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    # An experiment: middleware left out, by a part of its dotted path.
    for part in filter(None, os.environ.get("BENCH_DROP_MIDDLEWARE", "").split(",")):
        settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if part not in m]

    from endpoints.models import Merchant
    from endpoints.services import endpoint_create
    from relayproject.lib.clock import utcnow
    from relayproject.wsgi import application

    merchant = Merchant.objects.create(slug="bench", name="Bench")
    for _ in range(2):
        endpoint_create(merchant=merchant, url="http://127.0.0.1:9/hook", now=utcnow())

    if not args.unsettled:
        # What a gunicorn worker does once it has loaded the application.
        import runpy

        runpy.run_path(str(ROOT / "gunicorn.conf.py"))["post_worker_init"](None)

    batch = json.dumps({"events": [EVENT] * 100}).encode()
    single = json.dumps(EVENT).encode()
    phases = {
        "healthz": ("GET", "/healthz", b"", 200, 1),
        "single": ("POST", "/api/v1/events", single, 201, 1),
        "batch": ("POST", "/api/v1/events/batch", batch, 201, 20),
    }
    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    def call(method: str, path: str, body: bytes, expect: int) -> None:
        status = []
        chunks = application(
            environ(method, path, key, body), lambda s, h, e=None: status.append(s)
        )
        b"".join(chunks)
        chunks.close()
        if not status[0].startswith(str(expect)):
            raise SystemExit(f"{method} {path}: {status[0]}")

    def phase(name: str, n: int) -> dict:
        method, path, body, expect, _ = phases[name]
        for _ in range(min(50, n)):
            call(method, path, body, expect)
        statements[0] = 0
        backend = backend_pid()
        wall0, cpu0, pg0 = time.perf_counter(), time.process_time(), ticks(backend)
        with connection.execute_wrapper(count):
            for _ in range(n):
                call(method, path, body, expect)
        cpu = (time.process_time() - cpu0) / n * 1000
        wall = (time.perf_counter() - wall0) / n * 1000
        if backend_pid() != backend:
            raise SystemExit("the session changed during the phase")
        pg = (ticks(backend) - pg0) / os.sysconf("SC_CLK_TCK") / n * 1000
        return {"cpu": cpu, "wall": wall, "sql": statements[0] / n, "pg": pg}

    def backend_pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    def ticks(pid: int) -> int:
        # utime + stime of the PostgreSQL backend serving this session.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    if args.gunicorn:
        connection.close()
        under_gunicorn(key, phases, seconds=args.gunicorn, rounds=args.rounds)
        return
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"commit {commit}, {args.requests} requests a phase (batches: 1/20 of it)")
    if args.profile:
        method, path, body, expect, share = phases[args.profile]
        n = max(args.requests // share, 50)
        phase(args.profile, 50)
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for _ in range(n):
            call(method, path, body, expect)
        profiler.disable()
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out).sort_stats(order)
            stats.print_stats(args.top)
            print(out.getvalue().replace(str(ROOT) + "/", ""))
        print(f"(per request: divide by {n})")
        return
    if args.only:
        phases = {name: phases[name] for name in args.only.split(",")}
    results: dict[str, list[dict]] = {name: [] for name in phases}
    for _ in range(args.rounds):
        for name, (*_, share) in phases.items():
            results[name].append(phase(name, max(args.requests // share, 50)))
    print(
        "| request | CPU ms/request (median of rounds, min-max) "
        "| its PostgreSQL backend's CPU ms | wall ms | statements |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, runs in results.items():
        cpu = [r["cpu"] for r in runs]
        print(
            f"| {name} | {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f}) "
            f"| {statistics.median(r['pg'] for r in runs):.2f} "
            f"| {statistics.median(r['wall'] for r in runs):.3f} "
            f"| {statistics.median(r['sql'] for r in runs):.2f} |"
        )
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def _ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def under_gunicorn(key: str, phases: dict, *, seconds: float, rounds: int) -> None:
    """Each phase through a real socket: one sync worker, wrk -t1 -c4; CPU
    per request of the worker and of its PostgreSQL backend, from /proc."""
    import requests

    port = 8766
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "relayproject.wsgi", "--workers", "1"]
        + ["--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
        + ["--no-control-socket"]
        + os.environ.get("BENCH_GUNICORN_ARGS", "").split(),
        cwd=ROOT,
    )
    url = os.environ["DATABASE_URL"]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).ok:
                    break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # a starting server
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
        (worker,) = map(int, children.read_text().split())
        name = urlparse(url).path.lstrip("/")

        def backends() -> list[int]:
            with psycopg.connect(url, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s"
                    " AND pid <> pg_backend_pid()",
                    [name],
                ).fetchall()
            return [pid for (pid,) in rows]

        def run(phase: str) -> dict:
            method, path, body, _, _ = phases[phase]
            lua = None
            if method == "POST":
                lua = (
                    'wrk.method = "POST"\n'
                    f"wrk.body = {json.dumps(body.decode())}\n"
                    'wrk.headers["Content-Type"] = "application/json"\n'
                    f'wrk.headers["Authorization"] = "Bearer {key}"\n'
                )
            script = Path(f"/tmp/publish_cpu_{os.getpid()}.lua")
            script.write_text(lua or "")
            pids = backends()
            before = [_ticks(worker)] + [_ticks(p) for p in pids]
            out = subprocess.run(
                ["wrk", "-t1", "-c4", f"-d{seconds:.0f}s", "-s", str(script)]
                + [f"http://127.0.0.1:{port}{path}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            after = [_ticks(worker)] + [_ticks(p) for p in pids]
            script.unlink()
            done = int(re.search(r"(\d+) requests in", out).group(1))
            if re.search(r"Non-2xx", out):
                raise SystemExit(f"{phase}: refused requests\n{out}")
            tick = 1000 / os.sysconf("SC_CLK_TCK")
            return {
                "rate": done / seconds,
                "worker": (after[0] - before[0]) * tick / done,
                "pg": sum(a - b for a, b in zip(after[1:], before[1:], strict=True))
                * tick
                / done,
            }

        print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        results: dict[str, list[dict]] = {phase: [] for phase in phases}
        for _ in range(rounds):
            for phase in phases:
                results[phase].append(run(phase))
        print(
            "| request | req/s (median) | worker CPU ms/request | "
            "PostgreSQL CPU ms/request |"
        )
        print("|---|---:|---:|---:|")
        for phase, runs in results.items():
            print(
                f"| {phase} | {statistics.median(r['rate'] for r in runs):,.0f} "
                f"| {statistics.median(r['worker'] for r in runs):.2f} "
                f"| {statistics.median(r['pg'] for r in runs):.2f} |"
            )
        print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
