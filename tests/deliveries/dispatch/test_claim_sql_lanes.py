"""A claim reads as many rows with 2,000 events waiting in a lane as with one.

Each of the claim's two statements (claim_sql.DUE and claim_sql.lock) is run
under EXPLAIN ANALYZE on real PostgreSQL, and the rows every scan of the
deliveries table returned or filtered out are counted: the rows waiting
behind a lane's head must not be among them.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction

from deliveries.dispatch import claim_sql
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SHARE = 50


def rows_read(plan: dict) -> int:
    """Rows the scans of deliveries' partitions returned or filtered out."""
    own = 0
    scans = plan["Node Type"].endswith("Scan")
    if scans and plan.get("Relation Name", "").startswith(Delivery._meta.db_table):
        loops = plan.get("Actual Loops", 1)
        own = (plan["Actual Rows"] + plan.get("Rows Removed by Filter", 0)) * loops
    return own + sum(rows_read(child) for child in plan.get("Plans", []))


def explained(sql: str, params: dict) -> int:
    # Rolled back: the lock statement marks what it takes delivering. No
    # sequential scans: a test's few rows would be read whole, as no table
    # of a real relay's size ever is (the claim's plans use its indexes).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    if isinstance(plan, str):
        plan = json.loads(plan)
    return rows_read(plan[0]["Plan"])


def claim_reads(endpoint) -> tuple[int, int]:
    now = utcnow() + timedelta(seconds=1)
    due = explained(
        claim_sql.DUE,
        {
            "now": now,
            "cap": settings.ENDPOINT_MAX_IN_FLIGHT,
            "merchant_cap": settings.MERCHANT_MAX_IN_FLIGHT,
            "closed": EndpointHealth.State.CLOSED,
            "limit": SHARE,
        },
    )
    lock = explained(
        claim_sql.lock(SHARE),
        {
            "endpoints": [endpoint.pk],
            "shares": [SHARE],
            "merchant": endpoint.merchant_id,
            "now": now,
            "worker": "w",
            "lease": now + timedelta(seconds=60),
        },
    )
    return due, lock


def lane_of(merchant, events: int) -> None:
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}, ordering_key="k") for n in range(events)],
    )


def test_the_claim_reads_the_same_rows_with_1_and_2000_waiting_in_a_lane():
    short, long = factories.merchant(), factories.merchant()
    short_endpoint = factories.endpoint(short, ordered=True)
    long_endpoint = factories.endpoint(long, ordered=True)
    lane_of(short, 2)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")
    one = claim_reads(short_endpoint)

    lane_of(long, 2001)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")
    Delivery.objects.filter(endpoint=short_endpoint).delete()
    waiting = Delivery.objects.filter(endpoint=long_endpoint, status="waiting")
    assert waiting.count() == 2000
    many = claim_reads(long_endpoint)

    assert one == many
