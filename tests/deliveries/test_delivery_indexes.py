"""The deliveries table's indexes: few full ones, and the reads that need the
ones left served by them.

Every full index on deliveries_delivery costs each publish one more entry
per delivery, and each claim and record another (they change indexed
columns, so no update is HOT): bench/RESULTS.md, issue 21's ninth pass. The
reads below are explained with ANALYZE on PostgreSQL at 60,000 rows over
three endpoints: each must find its rows through an index whose conditions
select them, with no row of another endpoint, status or window read and
thrown away. No timing is asserted.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection

from deliveries.models import Delivery
from deliveries.ops import alerts
from deliveries.selectors import dead_count_of_endpoint
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import id_floor
from relayproject.portal import selectors as portal_selectors
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

PER_ENDPOINT = 20_000
TABLE = Delivery._meta.db_table

# Why each full index is there. A new one must say why here: it is paid for
# on every publish, claim and record.
FULL_INDEXES = {
    # the primary key (id, merchant_id) and the one delivery per event and
    # endpoint: both constraints
    "pkey",
    "delivery_unique_event_endpoint",
    # the admin's and the portal's newest-first lists, by endpoint and by status
    "delivery_endpoint_newest_idx",
    # an endpoint's rows of one status in a window of publish times: the
    # portal log's filters, a dead window's replay, the dead count
    "deliveries__endpoin_3d7b10_idx",
    "delivery_status_newest_idx",
    # windows by publish time (latency from publish over 24 h)
    "delivery_created_idx",
}

# A tenth dead and a tenth pending, the rest succeeded, one row every 0.1 s
# over the last hour or so, for each endpoint.
SEED = f"""
INSERT INTO {TABLE} (id, event_id, endpoint_id, merchant_id,
    status, attempt_count, budget_start, next_attempt_at, claimed_by, last_error,
    created_at, succeeded_at, dead_at)
SELECT %(dlv)s || lpad(i::text, 16, '0'), %(evt)s || lpad(i::text, 16, '0'),
       %(endpoint)s, %(merchant)s,
       CASE i %% 10 WHEN 0 THEN 'pending' WHEN 1 THEN 'dead' ELSE 'succeeded' END,
       1, 0, t, '', '', t,
       CASE WHEN i %% 10 > 1 THEN t END,
       CASE WHEN i %% 10 = 1 THEN t END
FROM generate_series(1, {PER_ENDPOINT}) AS i,
     LATERAL (SELECT %(start)s::timestamptz + i * interval '100 ms' AS t) AS at
"""


@pytest.fixture
def history(on_postgres):
    start = utcnow() - timedelta(hours=1)
    endpoints = [factories.endpoint() for _ in range(3)]
    with connection.cursor() as cursor:
        for n, endpoint in enumerate(endpoints):
            cursor.execute(
                SEED,
                {
                    "dlv": id_floor("dlv", start) + f"{n}",
                    "evt": id_floor("evt", start) + f"{n}",
                    "endpoint": endpoint.pk,
                    "merchant": endpoint.merchant_id,
                    "start": start,
                },
            )
        cursor.execute(f"ANALYZE {TABLE}")
    return start, endpoints[1]


def explained(sql: str, params: list) -> list[dict]:
    """Every node of the plan PostgreSQL ran for sql, flattened."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    nodes: list[dict] = []

    def walk(node: dict) -> None:
        nodes.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return nodes


def assert_read_by_index_only_its_rows(queryset, expected: int) -> None:
    sql, params = queryset.query.sql_with_params()
    nodes = explained(sql, list(params))
    scans = [n for n in nodes if n.get("Relation Name", "").startswith(TABLE)]
    assert scans, nodes
    for node in scans:
        # Rows read and thrown away: another endpoint's, status's or window's.
        # (A partition with rows cannot be read whole without them; an empty
        # one, another day's, may be.)
        assert node.get("Rows Removed by Filter", 0) == 0, node
        assert node.get("Rows Removed by Index Recheck", 0) == 0, node
    assert sum(n["Actual Rows"] for n in scans) >= expected


def test_the_tables_full_indexes_are_the_ones_that_say_why():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE t.relname = %s AND i.indpred IS NULL",
            [TABLE],
        )
        full = {name.removeprefix(f"{TABLE}_") for (name,) in cursor.fetchall()}
    assert full == FULL_INDEXES


def test_an_endpoints_dead_window_reads_only_its_dead_rows(history):
    start, endpoint = history
    since, until = start + timedelta(minutes=10), start + timedelta(minutes=20)
    window = Delivery.objects.filter(
        endpoint=endpoint,
        status=Delivery.Status.DEAD,
        created_at__gte=since,
        created_at__lt=until,
    )
    # The replay of a window (deliveries.replay.deliveries_recover) and its
    # dry run's count read exactly these rows.
    expected = window.count()
    assert expected == 600  # one row in ten, ten minutes of a row every 0.1 s

    assert_read_by_index_only_its_rows(window.values("pk"), expected)


def test_an_endpoints_dead_count_reads_only_its_dead_rows(history):
    _, endpoint = history
    assert dead_count_of_endpoint(endpoint_id=endpoint.pk) == PER_ENDPOINT // 10
    dead = Delivery.objects.filter(endpoint=endpoint, status=Delivery.Status.DEAD)

    assert_read_by_index_only_its_rows(dead.values("pk"), PER_ENDPOINT // 10)


def test_the_portal_logs_window_of_one_status_reads_only_those_rows(history):
    start, endpoint = history
    rows = portal_selectors.deliveries_filtered(
        merchant_id=endpoint.merchant_id,
        endpoint_id=endpoint.pk,
        status=Delivery.Status.SUCCEEDED,
        since=start + timedelta(minutes=10),
        until=start + timedelta(minutes=11),
    )
    expected = rows.count()
    assert expected == 480  # eight rows in ten, a minute of a row every 0.1 s

    assert_read_by_index_only_its_rows(rows.order_by("-pk")[:51].values("pk"), 51)


def test_the_portal_logs_window_of_every_status_reads_only_the_windows_rows(
    history,
):
    start, endpoint = history
    rows = portal_selectors.deliveries_filtered(
        merchant_id=endpoint.merchant_id,
        endpoint_id=endpoint.pk,
        since=start + timedelta(minutes=10),
        until=start + timedelta(minutes=11),
    )
    expected = rows.count()
    assert expected == 600  # every status, a minute of a row every 0.1 s

    assert_read_by_index_only_its_rows(rows.order_by("-pk")[:51].values("pk"), 51)


def test_the_held_count_of_a_breakers_endpoint_reads_only_its_unfinished_rows(
    history,
):
    _, endpoint = history
    assert alerts._held_counts([endpoint.pk]) == {endpoint.pk: PER_ENDPOINT // 10}
    unfinished = Delivery.objects.filter(
        endpoint_id__in=[endpoint.pk], status__in=Delivery.Status.UNFINISHED
    )

    assert_read_by_index_only_its_rows(unfinished.values("pk"), PER_ENDPOINT // 10)
