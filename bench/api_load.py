"""Events accepted per second by the REST API, through gunicorn, on PostgreSQL.

Not a test: a bounded run that prints throughput and p50/p99 latency for
single events and for batches of 100. It (re)creates its own database, so it
never touches the development or test databases.

    .venv/bin/python bench/api_load.py [--seconds 10] [--threads 8] [--workers 3]

BENCH_DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/bench_api.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}/api/v1"


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


def wait_until_up(timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{PORT}/healthz", timeout=5).ok:
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        time.sleep(0.2)  # polling a starting server, not synchronising tests
    raise SystemExit("gunicorn did not come up")


def run_phase(
    *, key: str, seconds: float, threads: int, batch: int
) -> tuple[int, list[float], int]:
    """(events accepted, request latencies in ms, failed requests)."""
    stop = time.monotonic() + seconds
    latencies: list[float] = []
    accepted = [0]
    failed = [0]
    lock = threading.Lock()

    def client(n: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {key}"
        i = 0
        mine: list[float] = []
        ok = bad = 0
        while time.monotonic() < stop:
            i += 1
            event = {"merchant": "bench", "type": "order.created", "data": {"n": i}}
            if batch == 1:
                url, body = f"{BASE}/events", event
            else:
                url, body = f"{BASE}/events/batch", {"events": [event] * batch}
            t0 = time.perf_counter()
            response = session.post(url, json=body, timeout=30)
            mine.append((time.perf_counter() - t0) * 1000)
            if response.status_code == 201:
                ok += batch
            else:
                bad += 1
        with lock:
            latencies.extend(mine)
            accepted[0] += ok
            failed[0] += bad

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return accepted[0], latencies, failed[0]


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--gunicorn-threads", type=int, default=4)
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
        "RELAY_ALLOW_PRIVATE_DESTINATIONS": "true",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("TEST_DATABASE_URL", None)
    manage(env, "migrate", "--noinput")
    key = manage(env, "create_api_key", "--name", "bench").strip().splitlines()[-1]
    server = subprocess.Popen(
        [
            str(Path(PYTHON).parent / "gunicorn"),
            "relayproject.wsgi",
            "--bind",
            f"127.0.0.1:{PORT}",
            "--workers",
            str(args.workers),
            "--worker-class",
            "gthread",
            "--threads",
            str(args.gunicorn_threads),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_until_up()
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {key}"
        session.post(f"{BASE}/merchants", json={"slug": "bench", "name": "Bench"})
        for _ in range(2):  # fan-out to two endpoints, as a real merchant has
            session.post(
                f"{BASE}/merchants/bench/endpoints",
                json={"url": "http://127.0.0.1:9/hook"},
            ).raise_for_status()
        run_phase(key=key, seconds=1, threads=args.threads, batch=1)  # warm up
        print(
            f"workers={args.workers}x{args.gunicorn_threads} threads client="
            f"{args.threads} seconds={args.seconds}"
        )
        for batch in (1, 100):
            accepted, latencies, failed = run_phase(
                key=key, seconds=args.seconds, threads=args.threads, batch=batch
            )
            print(
                f"batch={batch:<4} events/s={accepted / args.seconds:8.0f} "
                f"requests={len(latencies)} failed={failed} "
                f"p50={percentile(latencies, 50):.1f}ms "
                f"p99={percentile(latencies, 99):.1f}ms"
            )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
