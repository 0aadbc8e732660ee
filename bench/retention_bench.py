"""Retention at scale on PostgreSQL (issue 10, item 6): the claim's cost at
10 k and 1 M rows of history, `prune_deliveries --dry-run`, and the prune
itself while a dispatcher claims.

For each size: recreate the database `bench_retention`, migrate, make the
day partitions for the last 31 days and the week ahead, seed with SQL a
history shaped like the issue's (90% succeeded over 30 days, 5% dead, 5%
pending of which half are due; 1.5 attempts per delivery; 50 endpoints of
one merchant, skewed traffic), VACUUM ANALYZE, then time:

- the claim: `claim_batch(limit=50)` rolled back, median of 30, on a session
  set up as run_dispatcher's (prepared statements);
- `prune_deliveries --older-than 7 --dry-run`, median of 3;
- `prune_deliveries --older-than 7`, once, while a thread claims in a loop
  (the longest claim during the prune is the lock wait dispatchers saw).

    .venv/bin/python bench/retention_bench.py                 # 10 k and 1 M
    .venv/bin/python bench/retention_bench.py --rows 10000    # one size
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

from relayproject.lib.clock import utcnow

ROOT = Path(__file__).resolve().parent.parent
DB = "bench_retention"
# The last migration before the history was partitioned.
PLAIN_MIGRATION = "0005_dispatcher_heartbeat"
SERVER = "postgres://postgres@127.0.0.1:5432"

SEED = """
-- Ids as relayproject/lib/ids.py makes them: 10 base32 characters of the
-- creation time in milliseconds, then a unique tail (here the row number).
CREATE FUNCTION pg_temp.b32ms(v bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 45) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 40) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 35) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 30) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 25) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 20) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 15) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 10) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 5) & 31)::int + 1, 1) ||
    substr('0123456789abcdefghjkmnpqrstvwxyz', ((v >> 0) & 31)::int + 1, 1)
$$;
CREATE TEMP TABLE seed AS
SELECT g,
    now() - random() * interval '30 days' AS at,
    CASE WHEN g % 20 = 0 THEN 'dead' WHEN g % 20 = 1 THEN 'pending'
         ELSE 'succeeded' END AS status,
    -- skewed: endpoint n gets about twice the traffic of endpoint n + 7
    (SELECT array_agg(id ORDER BY id) FROM endpoints_endpoint)
        [1 + floor(50 * power(random(), 3))::int] AS endpoint
FROM generate_series(1, %(rows)s) g;
ALTER TABLE seed ADD COLUMN evt text, ADD COLUMN dlv text;
UPDATE seed SET
    evt = 'evt_' || pg_temp.b32ms((extract(epoch FROM at) * 1000)::bigint)
        || lpad(g::text, 16, '0'),
    dlv = 'dlv_' || pg_temp.b32ms((extract(epoch FROM at) * 1000)::bigint)
        || lpad(g::text, 16, '0');
INSERT INTO deliveries_event (id, type, data, created_at, idempotency_scope,
    request_fingerprint, merchant_id, traceparent)
SELECT evt, 'order.paid', '{"amount": 42}', at, '', '',
    (SELECT id FROM endpoints_merchant WHERE slug = 'bench'), ''
FROM seed;
INSERT INTO deliveries_delivery (merchant_id, id, event_id, endpoint_id, status, attempt_count,
    budget_start, next_attempt_at, claimed_by, last_error, created_at,
    succeeded_at, dead_at, last_attempt_at)
SELECT (SELECT merchant_id FROM endpoints_endpoint WHERE id = endpoint), dlv, evt, endpoint,
    -- attempt_count numbers the attempt rows below: a pending row has one.
    status, CASE WHEN status = 'pending' THEN 1 ELSE 1 + g % 2 END, 0,
    CASE WHEN status = 'pending' AND g % 40 = 1 THEN now() + interval '1 hour'
         ELSE at END,
    '', '', at,
    CASE WHEN status = 'succeeded' THEN at + interval '2 seconds' END,
    CASE WHEN status = 'dead' THEN at + interval '2 seconds' END,
    at + interval '1 second'
FROM seed;
INSERT INTO deliveries_attempt (merchant_id, delivery_id, endpoint_id, number, started_at,
    response_ms, status_code, error_kind, error_message, response_body, worker_id,
    outcome)
SELECT (SELECT merchant_id FROM endpoints_endpoint WHERE id = endpoint), dlv, endpoint, n, at + n * interval '1 second',
    30, 200, '', '', 'ok', 'bench', CASE WHEN n = 1 + g % 2 THEN status ELSE 'retry' END
FROM seed, generate_series(1, 1 + g % 2) n
WHERE status <> 'pending' OR n = 1;
"""


def psql(database: str, sql: str) -> None:
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", f"{SERVER}/{database}", "-c", sql],
        check=True,
    )


def prepare(*, plain: bool) -> None:
    psql("postgres", f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    psql("postgres", f"CREATE DATABASE {DB}")
    env = dict(os.environ, DATABASE_URL=f"{SERVER}/{DB}", DEBUG="true")
    manage = [sys.executable, "manage.py", "migrate", "-v0"]
    subprocess.run(manage, cwd=ROOT, env=env, check=True)
    if plain:
        # The tables as they were before partitioning, for comparison.
        subprocess.run(
            [*manage, "deliveries", PLAIN_MIGRATION], cwd=ROOT, env=env, check=True
        )


def main() -> None:
    global DB
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, action="append")
    parser.add_argument(
        "--plain", action="store_true", help="unpartitioned tables: the claim only"
    )
    parser.add_argument(
        "--seed-only", action="store_true", help="leave the seeded database, stop"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="measure a database --seed-only left"
    )
    parser.add_argument("--db", default=DB, help="database name (recreated)")
    args = parser.parse_args()
    DB = args.db
    if args.seed_only:
        measure(
            args.rows[0] if args.rows else 1_000_000, plain=args.plain, seed_only=True
        )
        return
    sizes = args.rows or [10_000, 1_000_000]
    results = [measure(rows, plain=args.plain, reuse=args.reuse) for rows in sizes]
    print(
        "\n| history rows | attempts | claim median | dry-run median | prune | "
        "partitions dropped | longest claim during prune |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['rows']:,} | {r['attempts']:,} | {r['claim_ms']:.1f} ms | "
            f"{r['dry_ms']:.0f} ms | {r['prune_ms']:.0f} ms | {r['days']} | "
            f"{r['max_wait_ms']:.0f} ms |"
        )
        if "claims" in r:
            print(
                f"  claims during the prune: {r['claims']}, "
                f"over 300 ms: {r['over_300']}"
            )
        print(f"  dry run said: {r['dry_out']}")
        print(f"  prune said: {r['prune_out']}")


def measure(
    rows: int, *, plain: bool, seed_only: bool = False, reuse: bool = False
) -> dict:
    if not reuse:
        prepare(plain=plain)
    os.environ["DATABASE_URL"] = f"{SERVER}/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    os.environ["RELAY_ALLOW_PRIVATE_DESTINATIONS"] = "true"
    # Development settings (no production keys needed); nothing is served.
    os.environ["DEBUG"] = "true"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection

    connection.close()
    if not reuse:
        _seed(rows, plain=plain)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM deliveries_attempt")
        attempts = cursor.fetchone()[0]
    if seed_only:
        return {}
    return _timings(rows, attempts, plain=plain)


def _seed(rows: int, *, plain: bool) -> None:
    from django.db import connection

    from deliveries.history import partitions
    from endpoints.models import Merchant
    from endpoints.services import endpoint_create

    merchant = Merchant.objects.create(slug="bench", name="Bench")
    for n in range(50):
        endpoint_create(merchant=merchant, url=f"http://127.0.0.1:9/{n}", now=utcnow())
    today = utcnow().date()
    if not plain:
        partitions.partitions_ensure(
            first=today - timedelta(days=31), last=today + timedelta(days=7)
        )
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(SEED.replace("%(rows)s", str(rows)))
    print(f"seeded {rows:,} deliveries in {time.monotonic() - started:.0f} s")
    connection.close()
    psql(DB, "VACUUM ANALYZE")


def _timings(rows: int, attempts: int, *, plain: bool) -> dict:
    from django.core.management import call_command
    from django.db import connection, transaction

    from deliveries.dispatch import claiming
    from deliveries.dispatch.session import limit_dispatcher_sessions

    # Claim on a session like run_dispatcher's (its limits, and the claim's
    # statements prepared once they repeat), so what is timed is what a
    # dispatcher pays, not planning over every partition on each call.
    connection.close()
    limit_dispatcher_sessions()

    def claim_once() -> float:
        t0 = time.perf_counter()
        with transaction.atomic():
            claiming.claim_batch(
                worker_id="b", now=utcnow(), lease_seconds=60, limit=50
            )
            transaction.set_rollback(True)
        return (time.perf_counter() - t0) * 1000

    for _ in range(5):
        claim_once()  # warm the plan and the cache
    claim_ms = statistics.median(claim_once() for _ in range(30))

    def command(*args: str) -> tuple[float, str]:
        out = StringIO()
        t0 = time.perf_counter()
        call_command("prune_deliveries", *args, stdout=out)
        return (time.perf_counter() - t0) * 1000, out.getvalue().strip()

    if plain:
        # The batch prune is what the issue measured (382 s at 1 M): skipped.
        return {
            "rows": rows,
            "attempts": attempts,
            "claim_ms": claim_ms,
            "dry_ms": 0.0,
            "dry_out": "-",
            "prune_ms": 0.0,
            "prune_out": "-",
            "days": "-",
            "max_wait_ms": 0.0,
        }
    dry = [command("--older-than", "7", "--dry-run") for _ in range(3)]
    dry_ms = statistics.median(ms for ms, _ in dry)

    waits: list[float] = []
    stop = threading.Event()

    def claimer() -> None:
        while not stop.is_set():
            waits.append(claim_once())
        connection.close()

    thread = threading.Thread(target=claimer)
    thread.start()
    prune_ms, prune_out = command("--older-than", "7")
    stop.set()
    thread.join()
    days = (
        prune_out.rsplit("dropped ", 1)[-1].split(" ")[0]
        if " partitions)" in prune_out
        else "0"
    )
    connection.close()
    return {
        "rows": rows,
        "attempts": attempts,
        "claim_ms": claim_ms,
        "dry_ms": dry_ms,
        "dry_out": dry[0][1],
        "prune_ms": prune_ms,
        "prune_out": prune_out,
        "days": days,
        "max_wait_ms": max(waits) if waits else 0.0,
        "claims": len(waits),
        "over_300": sum(w > 300 for w in waits),
    }


if __name__ == "__main__":
    main()
