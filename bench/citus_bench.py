"""Publish and claim cost on Citus against plain PostgreSQL (issue 24).

In-process, on a database of its own (name starting with "bench") that is
migrated (and, on Citus, distributed with citus_distribute) beforehand:
empty the relay tables, make MERCHANTS merchants with two endpoints each,
then time

- publish: EVENTS single events per merchant through events_publish (each
  its own transaction: an event and its two deliveries), as events/s;
- claim: ROUNDS claim_batch(limit=BATCH) calls over that backlog, each
  claim's rows given back (every round sees the same backlog), median and
  p95 in ms; on Citus that is the lock-free read of every shard plus one
  locking statement per merchant in the claim.

The machine is shared: beside the rates, this process's CPU time per publish
and per claim (time.process_time, the client's share only) and the
statements each sends (counted on one more of each, after the timed loops)
say what the work costs whatever the load.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_plain \\
        .venv/bin/python bench/citus_bench.py
    DATABASE_URL=postgres://postgres@127.0.0.1:9700/bench_citus \\
        .venv/bin/python bench/citus_bench.py

Delivery throughput with one and two dispatchers is bench/deliveries_bench.py
with --database-url naming the coordinator's bench database.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MERCHANTS = 20
EVENTS = 25
BATCH = 50
ROUNDS = 30


def main() -> int:
    if not os.environ.get("DATABASE_URL", "").rsplit("/", 1)[-1].startswith("bench"):
        sys.exit("DATABASE_URL must name a database of its own starting with 'bench'")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    os.environ.setdefault("DEBUG", "true")
    os.environ.setdefault("RELAY_ALLOW_PRIVATE_DESTINATIONS", "true")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from deliveries.dispatch.claiming import claim_batch, release
    from deliveries.services import EventInput, events_publish
    from endpoints.models import Merchant
    from endpoints.services import endpoint_create
    from relayproject.lib import citus
    from relayproject.lib.clock import utcnow

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE deliveries_attempt, deliveries_delivery, deliveries_event, "
            "endpoints_endpointsecret, endpoints_endpointhealth, "
            "notifications_endpointwatch, notifications_outgoingemail, "
            "deliveries_publishbucket, endpoints_endpoint, endpoints_apikey, "
            "endpoints_portallink, endpoints_membership, "
            "notifications_notificationsettings, endpoints_merchant CASCADE"
        )
    merchants = []
    for n in range(MERCHANTS):
        merchant = Merchant.objects.create(slug=f"bench{n}", name=f"bench {n}")
        for e in range(2):
            endpoint_create(
                merchant=merchant, url=f"http://127.0.0.1:9/{n}/{e}", now=utcnow()
            )
        merchants.append(merchant)
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(EVENTS):
        for merchant in merchants:
            events_publish(merchant=merchant, events=[EventInput("bench", {"i": i})])
    publish_s = time.perf_counter() - started
    publish_cpu_ms = (time.process_time() - cpu) * 1000 / (MERCHANTS * EVENTS)

    def claim_and_give_back() -> float:
        now = utcnow()
        t0 = time.perf_counter()
        claim = claim_batch(worker_id="bench", now=now, lease_seconds=60, limit=BATCH)
        took = (time.perf_counter() - t0) * 1000
        release(
            worker_id="bench",
            lease_until=claim.lease_until,
            delivery_ids=claim.delivery_ids,
            due_at=now,
        )
        return took

    cpu = time.process_time()
    timings = sorted(claim_and_give_back() for _ in range(ROUNDS))
    claim_cpu_ms = (time.process_time() - cpu) * 1000 / ROUNDS
    with CaptureQueriesContext(connection) as publish_sql:
        events_publish(merchant=merchants[0], events=[EventInput("bench", {"i": -1})])
    with CaptureQueriesContext(connection) as claim_sql:
        claim = claim_batch(
            worker_id="bench", now=utcnow(), lease_seconds=60, limit=BATCH
        )
    kind = "citus" if citus.on() else connection.vendor
    print(
        f"{kind}: publish {MERCHANTS * EVENTS / publish_s:.0f} events/s "
        f"({MERCHANTS * EVENTS} single publishes, 2 deliveries each); "
        f"claim of {BATCH} over {MERCHANTS} merchants: median "
        f"{statistics.median(timings):.1f} ms, p95 "
        f"{timings[int(len(timings) * 0.95) - 1]:.1f} ms ({ROUNDS} rounds, "
        f"{len(claim.delivery_ids)} rows); client CPU per publish "
        f"{publish_cpu_ms:.2f} ms, per claim {claim_cpu_ms:.1f} ms; statements "
        f"per publish {len(publish_sql)}, per claim {len(claim_sql)}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
