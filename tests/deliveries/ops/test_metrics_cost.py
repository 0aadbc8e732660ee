"""A scrape of /metrics at 200 k deliveries reads no history table.

Each statement the scrape sends is explained on the same PostgreSQL, and the
tables its plan touches must be the counter shards, the stored gauges and
the dispatchers' heartbeats: rows that do not grow with deliveries. The
figures themselves come from the dispatchers' count (GaugeRefresher), checked
here at the same size. No timing is asserted.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from deliveries.dispatch.maintenance import GaugeRefresher
from deliveries.models import AnalysisSnapshot, Counter, Delivery, DispatcherHeartbeat
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import id_floor
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ROWS = 200_000
# Tables whose size does not grow with traffic: one row per counter series
# and process, one per stored snapshot, one per running dispatcher.
CONSTANT_SIZE = {
    Counter._meta.db_table,
    AnalysisSnapshot._meta.db_table,
    DispatcherHeartbeat._meta.db_table,
}

# One INSERT ... SELECT: a tenth pending and due, a tenth dead, the rest
# succeeded, all behind one endpoint (the event rows are not needed: the
# delivery's event key is not a database constraint on partitioned tables).
SEED = f"""
INSERT INTO {Delivery._meta.db_table} (id, event_id, endpoint_id, merchant_id,
    status, attempt_count, budget_start, next_attempt_at, claimed_by, last_error,
    created_at, succeeded_at, dead_at)
SELECT %(dlv)s || lpad(i::text, 16, '0'), %(evt)s || lpad(i::text, 16, '0'),
       %(endpoint)s, %(merchant)s,
       CASE i %% 10 WHEN 0 THEN 'pending' WHEN 1 THEN 'dead' ELSE 'succeeded' END,
       1, 0, %(created)s, '', '', %(created)s,
       CASE WHEN i %% 10 > 1 THEN %(created)s END,
       CASE WHEN i %% 10 = 1 THEN %(created)s END
FROM generate_series(1, {ROWS}) AS i
"""


@pytest.fixture
def history(on_postgres):
    endpoint = factories.endpoint()
    created = utcnow() - timedelta(minutes=10)
    with connection.cursor() as cursor:
        cursor.execute(
            SEED,
            {
                "dlv": id_floor("dlv", created),
                "evt": id_floor("evt", created),
                "endpoint": endpoint.pk,
                "merchant": endpoint.merchant_id,
                "created": created,
            },
        )
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")
    return endpoint


def tables_read(sql: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "Relation Name" in node:
                found.add(node["Relation Name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(plan)
    return found


def test_a_scrape_at_200k_deliveries_reads_only_constant_size_tables(client, history):
    GaugeRefresher()(utcnow())  # a dispatcher's maintenance, as it runs

    with CaptureQueriesContext(connection) as queries:
        response = client.get("/metrics")

    assert response.status_code == 200
    statements = [q["sql"] for q in queries.captured_queries]
    for sql in statements:
        assert tables_read(sql) <= CONSTANT_SIZE, sql
    # Counters, the stored gauges, the heartbeats: a fixed few statements.
    assert 1 <= len(statements) <= 4, statements

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }
    assert samples[("relay_queue_depth", (("status", "pending"),))] == ROWS // 10
    assert samples[("relay_queue_depth", (("status", "dead"),))] == ROWS // 10
    assert samples[("relay_oldest_pending_seconds", ())] >= 600
    assert samples[("relay_gauges_age_seconds", ())] < 600
