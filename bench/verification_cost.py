"""What endpoint verification adds to a dispatcher's claims (issue 25 item 2).

On its own PostgreSQL database (bench_verify, created and migrated here), for
each number of endpoints awaiting verification: empty the relay tables, make
VERIFIED endpoints with ROWS due deliveries each, and that many awaiting ones
with HELD held deliveries each and their challenge's delivery scheduled
later (the steady state of receivers that never echo); ANALYZE. Then count
what the two reads of a claim cycle cost: the claim's endpoint read
(claim_sql.DUE, which passes awaiting endpoints by) and the verification look
(deliveries.verification.verifications_due, every PROBE_EVERY_SECONDS), as
statements and as PostgreSQL shared buffers touched (EXPLAIN ANALYZE
BUFFERS): numbers that do not move with the machine's load, unlike times.

    .venv/bin/python bench/verification_cost.py --awaiting 0 1000
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import timedelta
from pathlib import Path

from deliveries_bench import tables_empty  # bench/, beside this script

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/bench_verify"
VERIFIED = 200
ROWS = 5
HELD = 100


def database_prepare(db_url: str) -> None:
    """claim_cost.py's, which this cannot import (it imports the project at top)."""
    import subprocess

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


def world(*, awaiting: int) -> None:
    from django.db import connection, transaction

    from deliveries.verification import verification_make
    from endpoints.models import Endpoint, Merchant
    from endpoints.services import endpoint_create
    from relayproject.lib.clock import utcnow

    tables_empty()
    now = utcnow()
    merchant = Merchant.objects.create(
        slug="bench", name="bench", max_endpoints=100_000, max_in_flight=10_000
    )
    ready = [
        endpoint_create(merchant=merchant, url=f"http://127.0.0.1:9/v{n}", now=now)
        for n in range(VERIFIED)
    ]
    merchant.require_endpoint_verification = True
    merchant.save()
    held = [
        endpoint_create(merchant=merchant, url=f"http://127.0.0.1:9/a{n}", now=now)
        for n in range(awaiting)
    ]
    for endpoint in held:
        with transaction.atomic():  # as single_claims.claim_verifications runs it
            verification_make(endpoint_id=endpoint.pk, merchant_id=merchant.pk, now=now)
    with connection.cursor() as cursor:
        # Each challenge retry-scheduled an hour on: not due, as after a
        # receiver that does not echo has been tried a few times.
        cursor.execute(
            "UPDATE deliveries_delivery SET next_attempt_at = %s "
            "WHERE id IN (SELECT verification_delivery_id FROM endpoints_endpoint "
            "WHERE awaiting_verification)",
            [now + timedelta(hours=1)],
        )
        for n, (endpoint, count) in enumerate(
            [(e, ROWS) for e in ready] + [(e, HELD) for e in held]
        ):
            cursor.execute(
                "INSERT INTO deliveries_event (id, merchant_id, type, data, created_at,"
                " idempotency_scope, request_fingerprint, traceparent)"
                " SELECT %s || g, %s, 'bench', '{}'::jsonb,"
                " now() - interval '1 hour', '', '', ''"
                " FROM generate_series(1, %s) g",
                [f"evt_v{n}_", merchant.pk, count],
            )
            cursor.execute(
                "INSERT INTO deliveries_delivery (id, event_id, endpoint_id, status,"
                " attempt_count, budget_start, next_attempt_at, claimed_by,"
                " last_error, created_at, merchant_id)"
                " SELECT %s || g, %s || g, %s, 'pending', 0, 0,"
                " now() - interval '1 hour' + g * interval '1 ms', '', '',"
                " now() - interval '1 hour', %s"
                " FROM generate_series(1, %s) g",
                [f"dlv_v{n}_", f"evt_v{n}_", endpoint.pk, merchant.pk, count],
            )
        cursor.execute("VACUUM ANALYZE deliveries_delivery")
        cursor.execute("VACUUM ANALYZE endpoints_endpoint")
    assert Endpoint.objects.filter(awaiting_verification=True).count() == awaiting


def buffers(sql: str, params) -> int:
    """Shared buffers (hit + read) the statement touched, from its plan."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) " + sql, params)
        top = "\n".join(row[0] for row in cursor.fetchall())
    first = re.search(r"Buffers: shared ([^\n]*)", top)
    if first is None:
        return 0
    return sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", first.group(1)))


def measure() -> dict[str, int]:
    from django.conf import settings
    from django.db import connection

    from deliveries.dispatch import claim_sql
    from deliveries.verification import verifications_due
    from endpoints.models import EndpointHealth
    from relayproject.lib.clock import utcnow

    now = utcnow()
    due_params = {
        "now": now,
        "cap": settings.ENDPOINT_MAX_IN_FLIGHT,
        "merchant_cap": 10_000,
        "closed": EndpointHealth.State.CLOSED,
        "limit": settings.BATCH_SIZE,
    }
    look: list[str] = []

    def counted(execute, sql, params, many, context):
        look.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counted):
        found = verifications_due(now=now)
    assert found == [], found  # nothing due: the steady state measured
    sql, params = _query_of_verifications_due(now)
    with connection.cursor() as cursor:
        cursor.execute(claim_sql.DUE, due_params)
        listed = len(cursor.fetchall())
    return {
        "due_buffers": buffers(claim_sql.DUE, due_params),
        "due_endpoints_listed": listed,
        "look_statements": len(look),
        "look_buffers": buffers(sql, params),
    }


def _query_of_verifications_due(now):
    """The look's SQL and parameters, as the ORM compiles them."""
    from django.db.models import Exists, OuterRef, Q

    from deliveries.models import Delivery
    from endpoints.models import Endpoint

    due = Delivery.objects.filter(
        pk=OuterRef("verification_delivery_id"),
        merchant_id=OuterRef("merchant_id"),
        status__in=Delivery.Status.UNFINISHED,
        next_attempt_at__lte=now,
    )
    query = (
        Endpoint.objects.filter(awaiting_verification=True, is_active=True)
        .filter(Q(verification_delivery_id="") | Exists(due))
        .order_by("verification_requested_at")
        .values_list("pk", "merchant_id", "verification_delivery_id")
    )
    return query.query.sql_with_params()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("--awaiting", type=int, nargs="+", default=[0, 1_000])
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
    print(
        f"| awaiting endpoints (x {HELD} held rows) | + {VERIFIED} verified x {ROWS} |"
        " claim's endpoint read: buffers | endpoints listed |"
        " verification look: statements | buffers |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for awaiting in args.awaiting:
        world(awaiting=awaiting)
        got = measure()
        print(
            f"| {awaiting:,} | {VERIFIED * ROWS} | {got['due_buffers']} |"
            f" {got['due_endpoints_listed']} | {got['look_statements']} |"
            f" {got['look_buffers']} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
