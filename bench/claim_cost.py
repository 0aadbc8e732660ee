"""What one claim costs as the backlog behind one endpoint grows (issue 8, item 5).

On its own PostgreSQL database (bench_claim, created and migrated here), for
each backlog size: empty the relay tables, make one endpoint with that many
due deliveries plus OTHERS endpoints with a few each, ANALYZE, then time
claim_batch(limit=BATCH) ROUNDS times (each claim's rows are given back, so
every round sees the same backlog) and print the median and p95 in ms, with
the EXPLAIN of the row-locking statement at the largest size.

    .venv/bin/python bench/claim_cost.py                 # 0 .. 1,000,000 rows
    .venv/bin/python bench/claim_cost.py --sizes 1000 100000

Rows are inserted with one INSERT ... SELECT generate_series per size (a
million takes a minute or two on the shared machine); timings there are
noisy, so compare sizes within one run. Each size is timed on the dispatcher's
own session settings (deliveries/dispatch/session.py: JIT off, statements
prepared) and, before that, with JIT on as PostgreSQL defaults.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from deliveries_bench import tables_empty  # bench/, beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project, whatever the working directory

from relayproject.lib.clock import utcnow  # noqa: E402

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/bench_claim"
BATCH = 50
ROUNDS = 30
OTHERS = 20  # endpoints with a little due work each, beside the big one
OTHERS_ROWS = 5


def database_prepare(db_url: str) -> None:
    import psycopg

    name = db_url.rsplit("/", 1)[1]
    admin = db_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = dict(os.environ, DATABASE_URL=db_url, DEBUG="true")
    env.pop("TEST_DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def backlog(*, rows: int) -> None:
    """One endpoint with `rows` due deliveries, OTHERS with OTHERS_ROWS each."""
    from django.db import connection

    from endpoints.models import Merchant
    from endpoints.services import endpoint_create

    # TRUNCATE, not the ORM's delete: a million rows left by the last size
    # would take the ORM longer than the whole measurement.
    tables_empty()
    merchant = Merchant.objects.create(slug="bench", name="bench")
    big = endpoint_create(merchant=merchant, url="http://127.0.0.1:9/big", now=utcnow())
    others = [
        endpoint_create(merchant=merchant, url=f"http://127.0.0.1:9/o{n}", now=utcnow())
        for n in range(OTHERS)
    ]
    with connection.cursor() as cursor:
        for n, (endpoint, count) in enumerate(
            [(big, rows)] + [(o, OTHERS_ROWS) for o in others]
        ):
            if not count:
                continue
            # One event per row: the claim never reads events, and the
            # fan-out's unique (event, endpoint) needs them distinct.
            cursor.execute(
                "INSERT INTO deliveries_event (id, merchant_id, type, data, created_at,"
                " idempotency_scope, request_fingerprint, traceparent)"
                " SELECT %s || g, %s, 'bench', '{}'::jsonb,"
                " now() - interval '1 hour', '', '', ''"
                " FROM generate_series(1, %s) g",
                # Short prefixes: ids are at most 40 characters, even at 1 M.
                [f"evt_b{n}_", merchant.pk, count],
            )
            cursor.execute(
                "INSERT INTO deliveries_delivery (id, event_id, endpoint_id, status,"
                " attempt_count, budget_start, next_attempt_at, claimed_by,"
                " last_error, created_at, merchant_id)"
                " SELECT %s || g, %s || g, %s, 'pending', 0, 0,"
                " now() - interval '1 hour' + g * interval '1 ms', '', '',"
                " now() - interval '1 hour', %s"
                " FROM generate_series(1, %s) g",
                [f"dlv_b{n}_", f"evt_b{n}_", endpoint.pk, merchant.pk, count],
            )
        cursor.execute("VACUUM ANALYZE deliveries_delivery")
        cursor.execute("VACUUM ANALYZE endpoints_endpoint")


def time_claims() -> dict[str, list[float]]:
    """ROUNDS claims with JIT on (PostgreSQL's default), then ROUNDS with it
    off (the dispatcher's session); sorted timings in ms per setting.

    Not alternated: the session's prepared statements keep the plan (and the
    JIT decision) they were made with, so each block has a session of its own.
    The second block sees the dead index entries the first left, so if
    anything it is the off block that is penalised."""
    from django.db import connection

    from deliveries.dispatch import claiming
    from relayproject.lib.clock import utcnow

    timings: dict[str, list[float]] = {"on": [], "off": []}
    for jit, block in timings.items():
        connection.close()  # a fresh session: nothing prepared yet
        with connection.cursor() as cursor:
            cursor.execute(f"SET jit = {jit}")
        for _ in range(ROUNDS):
            now = utcnow()
            started = time.perf_counter()
            claim = claiming.claim_batch(
                worker_id="bench", now=now, lease_seconds=60, limit=BATCH
            )
            block.append((time.perf_counter() - started) * 1000)
            claiming.release(
                worker_id="bench",
                lease_until=claim.lease_until,
                delivery_ids=claim.delivery_ids,
                due_at=now,
            )
    return {jit: sorted(t) for jit, t in timings.items()}


def server_ms() -> tuple[float, float, str]:
    """PostgreSQL's own execution time of the claim's two scans over the
    deliveries (which endpoints have due work; their rows, locked), without
    the round trips a loaded machine stretches; and the second one's plan."""
    from django.db import connection, transaction

    from deliveries.dispatch import claim_sql, due, shares
    from relayproject.lib.clock import utcnow

    now = utcnow()
    listed = due.endpoints_with_due_work(now=now, limit=BATCH)
    taken = shares.fair_shares(limit=BATCH, rooms=[(e, 32) for e in listed])
    plans = []
    # The claim's own statements (claim_sql.py); the locking one also marks
    # its rows, so it runs in a transaction that is rolled back.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, COSTS OFF) " + claim_sql.DUE,
            {
                "now": now,
                "cap": 32,
                "merchant_cap": BATCH,
                "closed": "closed",
                "limit": BATCH,
            },
        )
        plans.append([r[0] for r in cursor.fetchall()])
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)"
            + claim_sql.lock(max(taken.values())),
            {
                "endpoints": list(taken),
                "shares": list(taken.values()),
                "now": now,
                "worker": "bench-explain",
                "lease": now,
            },
        )
        plans.append([r[0] for r in cursor.fetchall()])
        transaction.set_rollback(True)

    def execution(plan: list[str]) -> float:
        line = next(x for x in plan if x.startswith("Execution Time"))
        return float(line.split(":")[1].split()[0])

    return execution(plans[0]), execution(plans[1]), "\n".join(plans[1])


def p95(ordered: list[float]) -> float:
    return ordered[int(len(ordered) * 0.95) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[0, 1_000, 100_000, 1_000_000]
    )
    args = parser.parse_args()
    database_prepare(args.db)
    os.environ["DATABASE_URL"] = args.db
    os.environ["DEBUG"] = "true"  # a development key is fine for a benchmark
    os.environ["RELAY_ALLOW_PRIVATE_DESTINATIONS"] = "true"  # never sent to
    os.environ.pop("TEST_DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from deliveries.dispatch.session import limit_dispatcher_sessions

    # The sessions run_dispatcher opens (its time limits, JIT off).
    limit_dispatcher_sessions()
    print(
        f"| rows behind one endpoint | + {OTHERS} endpoints x {OTHERS_ROWS} |"
        f" claim of {BATCH}, wall: median ms | p95 ms |"
        " with jit=on: median ms | p95 ms |"
        " server: endpoints with due work ms | rows locked ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    plan = ""
    for size in args.sizes:
        started = time.monotonic()
        backlog(rows=size)
        filled = time.monotonic() - started
        timed = time_claims()
        timings, jitted = timed["off"], timed["on"]
        due_ms, lock_ms, plan = server_ms()
        print(
            f"| {size:,} | {OTHERS * OTHERS_ROWS} |"
            f" {statistics.median(timings):.1f} | {p95(timings):.1f} |"
            f" {statistics.median(jitted):.1f} | {p95(jitted):.1f} |"
            f" {due_ms:.2f} | {lock_ms:.2f} |"
            f"  <!-- filled in {filled:.0f} s -->",
            flush=True,
        )
    print("\n```\n" + plan + "\n```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
