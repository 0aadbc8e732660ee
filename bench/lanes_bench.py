"""Ordered lanes (issue 25): their throughput, and what a claim and a promotion
cost with a long lane.

On its own PostgreSQL database (bench_lanes, created and migrated here):

1. throughput: one ordered endpoint on bench/receiver.py (instant answers),
   EVENTS events spread over KEYS ordering keys (10 and 1,000 by default),
   published in process, then two `run_dispatcher --drain` processes. It
   prints, per key count: events per second (wall, so only comparable within
   one run and labelled with the load), the dispatchers' CPU per event
   (user + system of the children: what a machine that is not quiet can
   still measure), and the server transactions per event (pg_stat_database),
   then checks every key's events were first sent in publish order.
2. cost: one lane with WAITING rows behind its head (100,000 by default,
   written with one INSERT ... SELECT), beside a lane of one: the claim's two
   statements and the promotion (deliveries/lanes.py's _ADVANCE_SQL) under
   EXPLAIN (ANALYZE, BUFFERS), as rows read and buffers touched: they must
   not grow with the lane. Claims are timed too (median ms, wall).

    .venv/bin/python bench/lanes_bench.py                   # the figures
    .venv/bin/python bench/lanes_bench.py --events 200 --keys 10 --waiting 1000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from deliveries_bench import (  # bench/, beside this script
    ReceiverProcess,
    database_prepare,
    dispatcher_env,
    django_setup,
    load_now,
    relay_reset,
    tables_empty,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/bench_lanes"
CLAIM_ROUNDS = 20
SHARE = 50
TIMEOUT_SECONDS = 1800  # a throughput run gives up after this


# -- 1. throughput --------------------------------------------------------------


def lanes_publish(*, events: int, keys: int) -> None:
    from deliveries.services import EventInput, events_publish
    from endpoints.models import Endpoint, Merchant

    Endpoint.objects.update(ordered=True)
    merchant = Merchant.objects.get(slug="bench")
    for start in range(0, events, 500):
        events_publish(
            merchant=merchant,
            events=[
                EventInput("order.paid", {"n": n}, ordering_key=f"k{n % keys}")
                for n in range(start, min(start + 500, events))
            ],
        )


def transactions() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        )
        return cursor.fetchone()[0]


def in_publish_order() -> bool:
    """Each key's events were first attempted in publish order."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.ordering_key, d.lane_seq, min(a.started_at) "
            "FROM deliveries_delivery d JOIN deliveries_attempt a "
            "ON a.delivery_id = d.id GROUP BY 1, 2 ORDER BY 1, 2"
        )
        last: dict[str, object] = {}
        for key, _, started in cursor.fetchall():
            if key in last and last[key] > started:
                return False
            last[key] = started
    return True


def run_throughput(*, db_url: str, events: int, keys: int, receiver) -> dict:
    from django.db import connection

    from deliveries.models import Delivery

    relay_reset(base=receiver.base, endpoints=1)
    lanes_publish(events=events, keys=keys)
    connection.close()  # its commits are not the dispatchers'
    before_tx = transactions()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    # Not --drain: a dispatcher that finds every head in flight elsewhere
    # would stop, and the run would measure one. Stopped once all is sent.
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "run_dispatcher",
                "--skip-checks",
                "--worker-id",
                f"lanes-{k}",
            ],
            cwd=ROOT,
            env=dispatcher_env(db_url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(2)
    ]
    deadline, polls = time.monotonic() + TIMEOUT_SECONDS, 0
    while time.monotonic() < deadline:
        polls += 1  # one transaction each (autocommit), taken off below
        if Delivery.objects.filter(status="succeeded").count() >= events:
            break
        time.sleep(0.05)
    wall = time.monotonic() - started
    connection.close()
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    done = Delivery.objects.filter(status="succeeded").count()
    return {
        "keys": keys,
        "events": events,
        "delivered": done,
        "wall_s": round(wall, 2),
        "events_per_s": round(done / wall, 1) if wall else 0.0,
        "cpu_ms_per_event": round(cpu * 1000 / max(done, 1), 2),
        # The server's counters, less this script's polls (and its last
        # read): approximate, PostgreSQL flushes them about once a second.
        "transactions_per_event": round(
            (transactions() - before_tx - polls - 2) / max(done, 1), 2
        ),
        "in_order": in_publish_order(),
        "load": load_now(),
    }


# -- 2. cost at a long lane -------------------------------------------------------


def lane_seed(*, waiting: int) -> tuple:
    """Two ordered endpoints of one merchant: lane "long" with a head and
    `waiting` rows behind it, lane "short" with a head and one."""
    from django.db import connection

    from endpoints.models import Merchant
    from endpoints.services import endpoint_create
    from relayproject.lib.clock import utcnow

    tables_empty()
    merchant = Merchant.objects.create(slug="bench", name="bench")
    endpoints = {
        name: endpoint_create(
            merchant=merchant,
            url=f"http://127.0.0.1:9/{name}",
            ordered=True,
            now=utcnow(),
        )
        for name in ("long", "short")
    }
    with connection.cursor() as cursor:
        for name, rows in (("long", waiting + 1), ("short", 2)):
            cursor.execute(
                "INSERT INTO deliveries_event (id, merchant_id, type, data, created_at,"
                " idempotency_scope, request_fingerprint, traceparent, ordering_key)"
                " SELECT %s || g, %s, 'bench', '{}'::jsonb, now(), '', '', '', %s"
                " FROM generate_series(1, %s) g",
                [f"evt_{name}_", merchant.pk, name, rows],
            )
            cursor.execute(
                "INSERT INTO deliveries_delivery (id, event_id, endpoint_id, status,"
                " attempt_count, budget_start, next_attempt_at, claimed_by,"
                " last_error, created_at, merchant_id, ordering_key, lane_seq)"
                " SELECT %s || g, %s || g, %s,"
                " CASE WHEN g = 1 THEN 'pending' ELSE 'waiting' END, 0, 0,"
                " now() - interval '1 minute', '', '', now(), %s, %s, g"
                " FROM generate_series(1, %s) g",
                [
                    f"dlv_{name}_",
                    f"evt_{name}_",
                    endpoints[name].pk,
                    merchant.pk,
                    name,
                    rows,
                ],
            )
        cursor.execute("VACUUM ANALYZE deliveries_delivery")
    return merchant, endpoints


def explained(sql: str, params: dict) -> dict:
    """Rows the deliveries scans returned or filtered, buffers, server ms."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def rows(node: dict) -> int:
        own = 0
        if node["Node Type"].endswith("Scan") and node.get(
            "Relation Name", ""
        ).startswith("deliveries_delivery"):
            own = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node[
                "Actual Loops"
            ]
        return own + sum(rows(child) for child in node.get("Plans", []))

    top = plan[0]["Plan"]
    return {
        "rows": rows(top),
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "ms": round(plan[0]["Execution Time"], 3),
    }


def lane_costs(merchant, endpoint, name: str) -> dict:
    """The claim's two statements with the lane's head pending, then the
    promotion with the head just finished (as the record runs it)."""
    from django.conf import settings
    from django.db import connection

    from deliveries import lanes
    from deliveries.dispatch import claim_sql
    from endpoints.models import EndpointHealth
    from relayproject.lib.clock import utcnow

    now = utcnow()
    due = explained(
        claim_sql.DUE,
        {
            "now": now,
            "cap": settings.ENDPOINT_MAX_IN_FLIGHT,
            "merchant_cap": 100_000,
            "closed": EndpointHealth.State.CLOSED,
            "limit": SHARE,
        },
    )
    lock = explained(
        claim_sql.lock(SHARE),
        {
            "endpoints": [endpoint.pk],
            "shares": [SHARE],
            "merchant": merchant.pk,
            "now": now,
            "worker": "bench",
            "lease": now + timedelta(seconds=60),
        },
    )
    head = f"dlv_{name}_1"
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE deliveries_delivery SET status = 'succeeded' WHERE id = %s", [head]
        )
    promote = explained(
        lanes._ADVANCE_SQL,
        {"m": [merchant.pk], "e": [endpoint.pk], "k": [name], "now": now},
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE deliveries_delivery SET status = 'pending' WHERE id = %s", [head]
        )
    return {"due": due, "lock": lock, "promote": promote}


def claims_timed() -> float:
    from deliveries.dispatch import claiming
    from relayproject.lib.clock import utcnow

    timings = []
    for _ in range(CLAIM_ROUNDS):
        now = utcnow()
        started = time.perf_counter()
        claim = claiming.claim_batch(
            worker_id="bench", now=now, lease_seconds=60, limit=SHARE
        )
        timings.append((time.perf_counter() - started) * 1000)
        claiming.release(
            worker_id="bench",
            lease_until=claim.lease_until,
            delivery_ids=claim.delivery_ids,
            due_at=now,
        )
    return statistics.median(timings)


def run_cost(*, waiting: int) -> dict:
    merchant, endpoints = lane_seed(waiting=waiting)
    costs = {
        name: lane_costs(merchant, endpoint, name)
        for name, endpoint in endpoints.items()
    }
    return {
        "waiting": waiting,
        "costs": costs,
        "claim_ms": round(claims_timed(), 2),
        "load": load_now(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[10, 1_000])
    parser.add_argument("--waiting", type=int, default=100_000)
    args = parser.parse_args()
    database_prepare(args.db)
    django_setup(args.db)
    os.environ.pop("TEST_DATABASE_URL", None)
    from deliveries.dispatch.session import limit_dispatcher_sessions

    limit_dispatcher_sessions()
    receiver = ReceiverProcess([])
    try:
        print(f"load before: {load_now()}", flush=True)
        print(
            "| keys | events | delivered | wall s | events/s | CPU ms/event |"
            " transactions/event | first sends in publish order | load |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for keys in args.keys:
            r = run_throughput(
                db_url=args.db, events=args.events, keys=keys, receiver=receiver
            )
            print(
                f"| {r['keys']:,} | {r['events']:,} | {r['delivered']:,} |"
                f" {r['wall_s']} | {r['events_per_s']} | {r['cpu_ms_per_event']} |"
                f" {r['transactions_per_event']} | {r['in_order']} | {r['load']} |",
                flush=True,
            )
    finally:
        receiver.stop()
    r = run_cost(waiting=args.waiting)
    print(
        f"\nA lane of {r['waiting']:,} waiting rows beside a lane of 1"
        f" (claim of {SHARE}: median {r['claim_ms']} ms wall; load {r['load']}):\n"
    )
    print("| statement | lane | deliveries rows read | buffers | server ms |")
    print("|---|---|---:|---:|---:|")
    for statement in ("due", "lock", "promote"):
        for name in ("short", "long"):
            c = r["costs"][name][statement]
            print(
                f"| {statement} | {name} | {c['rows']} | {c['buffers']} | {c['ms']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
