"""Migrations endpoints 0012-0013, deliveries 0014, notifications 0002 on a
database with rows: every merchant-scoped row gets its endpoint's merchant,
and the keys Citus needs are there (and checked) on plain PostgreSQL too."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from endpoints.models import EndpointSecret
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import new_id
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = [
    ("endpoints", "0011_endpoint_permanent_statuses"),
    ("deliveries", "0013_heartbeat_deaths"),
    ("notifications", "0001_initial"),
]


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor


def _key_columns(table: str, name: str) -> list[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return found[name]["columns"]


def seed(apps, endpoint_id: str, merchant_id: int) -> dict[str, str]:
    """A secret, a health and a watch row, an event, a delivery and an
    attempt, as the schema before these migrations knew them."""
    at = utcnow()
    model = apps.get_model
    model("endpoints", "EndpointHealth").objects.filter(
        endpoint_id=endpoint_id
    ).delete()
    model("endpoints", "EndpointHealth").objects.create(
        endpoint_id=endpoint_id, failure_threshold=5, cooldown_seconds=30
    )
    model("notifications", "EndpointWatch").objects.create(endpoint_id=endpoint_id)
    event = model("deliveries", "Event").objects.create(
        id=new_id("evt", at=at),
        merchant_id=merchant_id,
        type="t",
        data={},
        created_at=at,
    )
    delivery = model("deliveries", "Delivery").objects.create(
        id=new_id("dlv", at=at),
        event_id=event.id,
        endpoint_id=endpoint_id,
        next_attempt_at=at,
        created_at=at,
    )
    model("deliveries", "Attempt").objects.create(
        delivery_id=delivery.id,
        endpoint_id=endpoint_id,
        number=1,
        started_at=at,
        outcome="retry",
    )
    return {"delivery": delivery.id}


def test_rows_get_their_endpoints_merchant_and_the_keys_include_it():
    endpoint = factories.endpoint()
    other = factories.endpoint()  # another merchant's
    executor = migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        seed(apps, endpoint.pk, endpoint.merchant_id)
        seed(apps, other.pk, other.merchant_id)
    finally:
        migrate(None)

    with connection.cursor() as cursor:
        for table in (
            "endpoints_endpointsecret",
            "endpoints_endpointhealth",
            "notifications_endpointwatch",
            "deliveries_delivery",
            "deliveries_attempt",
        ):
            cursor.execute(
                f"SELECT count(*), count(*) FILTER (WHERE t.merchant_id = e.merchant_id) "
                f"FROM {table} t JOIN endpoints_endpoint e ON e.id = t.endpoint_id"
            )
            total, right = cursor.fetchone()
            assert total >= 2 and right == total, table
    assert _key_columns("deliveries_delivery", "deliveries_delivery_pkey") == [
        "id",
        "merchant_id",
    ]
    assert _key_columns("deliveries_attempt", "deliveries_attempt_pkey") == [
        "id",
        "delivery_id",
        "merchant_id",
    ]
    assert _key_columns("endpoints_endpoint", "endpoints_endpoint_pkey") == [
        "id",
        "merchant_id",
    ]
    # The key into the endpoint names the merchant: a secret that claims
    # another merchant than its endpoint's is refused at commit.
    with pytest.raises(IntegrityError), transaction.atomic():
        EndpointSecret.objects.create(
            endpoint=endpoint,
            merchant_id=other.merchant_id,
            secret="whsec_" + "A" * 32,
            created_at=utcnow(),
        )


def test_the_migrations_reverse_with_the_rows():
    endpoint = factories.endpoint()
    try:
        migrate(BEFORE)
        assert _key_columns("endpoints_endpoint", "endpoints_endpoint_pkey") == ["id"]
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM endpoints_endpointsecret")
            assert cursor.fetchone()[0] == 1
    finally:
        migrate(None)
    assert EndpointSecret.objects.filter(endpoint=endpoint).exists()
