"""The claim's lock statement does work in proportion to the rows it takes.

A batch of 60 over 10 endpoints is run under EXPLAIN ANALYZE on real
PostgreSQL, and the rows every join of the plan compared and threw away are
counted: joining the locked rows to the rows the UPDATE marked compared each
with each (39,800 times for a default batch of 200, growing with the
square of the batch).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction

from deliveries.dispatch import claim_sql
from deliveries.dispatch.load_sql import JOB_COLUMNS
from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ENDPOINTS, SHARE = 10, 6


def rows_compared_and_dropped(plan: dict) -> int:
    own = plan.get("Rows Removed by Join Filter", 0) * plan.get("Actual Loops", 1)
    return own + sum(rows_compared_and_dropped(p) for p in plan.get("Plans", []))


def lock_explained(endpoints, *, now) -> tuple[dict, list[tuple]]:
    """The plan of a real claim of every endpoint's share, and its rows (a
    second run, both rolled back: the statement marks what it takes)."""
    sql = claim_sql.lock(SHARE)
    params = {
        "endpoints": [e.pk for e in endpoints],
        "shares": [SHARE] * len(endpoints),
        "merchant": None,
        "now": now,
        "worker": "w",
        "lease": now + timedelta(seconds=60),
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        transaction.set_rollback(True)
    if isinstance(plan, str):
        plan = json.loads(plan)
    return plan[0]["Plan"], rows


def test_a_batch_is_not_compared_row_by_row():
    merchant = factories.merchant()
    endpoints = [factories.endpoint(merchant) for _ in range(ENDPOINTS)]
    events_publish(
        merchant=merchant,
        events=[EventInput("a.b", {"n": n}) for n in range(SHARE)],
    )
    # One expired lease per endpoint: locked, and left for the claim's
    # Python to spend its lost attempt (claiming.rows_take), not marked.
    now = utcnow() + timedelta(seconds=1)
    expired = [
        Delivery.objects.filter(endpoint=e).order_by("id").first().pk for e in endpoints
    ]
    Delivery.objects.filter(pk__in=expired).update(
        status="delivering",
        claimed_by="gone",
        claimed_until=now - timedelta(seconds=5),
        next_attempt_at=now - timedelta(seconds=5),
    )

    plan, rows = lock_explained(endpoints, now=now)

    batch = ENDPOINTS * SHARE
    assert plan["Actual Rows"] == batch
    assert rows_compared_and_dropped(plan) < batch
    # Every row locked comes back once: marked with its job's columns, or
    # left (the expired leases) with none.
    taken = {row[0]: row for row in rows if row[9] is True}
    left = {row[0]: row for row in rows if row[9] is False}
    assert len(rows) == batch and set(left) == set(expired)
    assert len(taken) == batch - ENDPOINTS
    assert all(row[1] == "pending" for row in taken.values())
    assert all(row[10] == row[0] for row in taken.values())  # job_id
    assert all(
        row[2] == "gone" and row[10:] == (None,) * JOB_COLUMNS for row in left.values()
    )
