"""Migration 0006 on a database with rows: they move into day partitions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from deliveries.history import partitions
from deliveries.history.partitions import ATTEMPTS, DELIVERIES, EVENTS
from deliveries.models import Attempt, Delivery, Event
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import new_id
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

UNPARTITIONED = [("deliveries", "0005_dispatcher_heartbeat")]


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor


def where(table: str, pk) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tableoid::regclass::text FROM {table} WHERE id = %s", [pk]
        )
        return cursor.fetchone()[0]


def seed_unpartitioned(apps, endpoint) -> dict:
    """Rows on three days (one long before the days made ahead), as 0002 knew them."""
    old_event = apps.get_model("deliveries", "Event")
    old_delivery = apps.get_model("deliveries", "Delivery")
    old_attempt = apps.get_model("deliveries", "Attempt")
    rows = {}
    for age, status in ((90, "succeeded"), (1, "dead"), (0, "pending")):
        at = utcnow() - timedelta(days=age)
        event = old_event.objects.create(
            id=new_id("evt", at=at),
            merchant_id=endpoint.merchant_id,
            type="order.paid",
            data={"age": age},
            created_at=at,
            idempotency_scope="platform",
            idempotency_key=f"key-{age}",
        )
        delivery = old_delivery.objects.create(
            id=new_id("dlv", at=at),
            event=event,
            endpoint_id=endpoint.pk,
            status=status,
            attempt_count=2,
            next_attempt_at=at,
            created_at=at,
            succeeded_at=at if status == "succeeded" else None,
            dead_at=at if status == "dead" else None,
        )
        for number in (1, 2):
            old_attempt.objects.create(
                delivery=delivery,
                endpoint_id=endpoint.pk,
                number=number,
                started_at=at,
                outcome="retry",
            )
        rows[age] = (at.date(), event.id, delivery.id)
    return rows


def test_existing_rows_move_into_day_partitions_and_the_schema_keeps_working():
    endpoint = factories.endpoint()
    executor = migrate(UNPARTITIONED)
    try:
        assert not partitions.partitioned()
        apps = executor.loader.project_state(UNPARTITIONED).apps
        days = seed_unpartitioned(apps, endpoint)
        last_attempt = apps.get_model("deliveries", "Attempt").objects.order_by("-id")[
            0
        ]
    finally:
        migrate(None)

    assert partitions.partitioned()
    for day, event_id, delivery_id in days.values():
        assert where(EVENTS.table, event_id) == EVENTS.partition(day)
        assert where(DELIVERIES.table, delivery_id) == DELIVERIES.partition(day)
        for attempt in Attempt.objects.filter(delivery_id=delivery_id):
            assert where(ATTEMPTS.table, attempt.pk) == ATTEMPTS.partition(day)
    assert Delivery.objects.count() == 3 and Attempt.objects.count() == 6
    # The attempt id sequence goes on after the copied rows.
    new = Attempt.objects.create(
        delivery_id=days[0][2],
        endpoint=endpoint,
        number=3,
        started_at=utcnow(),
        outcome="retry",
    )
    assert new.pk > last_attempt.pk
    # The constraints Django knows by name are there, with the day column
    # and then the merchant (endpoints 0013: the Citus distribution column).
    with connection.cursor() as cursor:
        constraints = {
            name: c["columns"]
            for name, c in connection.introspection.get_constraints(
                cursor, DELIVERIES.table
            ).items()
        }
    assert constraints["delivery_unique_event_endpoint"] == [
        "event_id",
        "endpoint_id",
        "id",
        "merchant_id",
    ]
    assert constraints["deliveries_delivery_pkey"] == ["id", "merchant_id"]
    assert "delivery_due_idx" in constraints
    assert Event.objects.get(idempotency_key="key-90").data == {"age": 90}


def test_the_migration_reverses_to_plain_tables_with_the_rows():
    endpoint = factories.endpoint()
    event = Event.objects.create(
        merchant=endpoint.merchant, type="t", data={}, created_at=utcnow()
    )
    Delivery.objects.create(
        event=event, endpoint=endpoint, next_attempt_at=utcnow(), created_at=utcnow()
    )
    try:
        migrate(UNPARTITIONED)
        assert not partitions.partitioned()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM deliveries_delivery")
            assert cursor.fetchone()[0] == 1
    finally:
        migrate(None)
    assert partitions.partitioned()
    assert Delivery.objects.count() == 1
