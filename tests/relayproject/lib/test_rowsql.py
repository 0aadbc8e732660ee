"""rowsql.insert_rows: the publish's hand-written INSERT of model rows."""

from __future__ import annotations

import pytest
from django.db import connection

from deliveries.models import Delivery, Event
from relayproject.lib import rowsql
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import new_ids
from tests.support import factories


def through_the_field(model) -> list[str]:
    """The columns whose values go through their field's get_db_prep_save."""
    return [name for name, _, _, field in rowsql._insert_plan(model) if field]


def test_the_publishs_rows_go_as_they_are_but_the_prepared_json():
    # A field's get_db_prep_save per value was a twentieth of a batch of 100
    # events' worker time when lane_seq (a PositiveBigIntegerField) was not
    # known as plain (issue 21's ninth pass). Event.data is given prepared
    # (the JSON text validation made); nothing else needs its field.
    assert through_the_field(Delivery) == []
    assert through_the_field(Event) == ["data"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_deliveries_written_by_insert_rows_read_back_the_same(on_postgres):
    endpoint = factories.endpoint()
    now = utcnow()
    ids = new_ids("dlv", 2)
    rows = [
        rowsql.built(
            Delivery,
            {
                "id": delivery_id,
                "event_id": "evt_not_needed",
                "endpoint_id": endpoint.pk,
                "merchant_id": endpoint.merchant_id,
                "next_attempt_at": now,
                "created_at": now,
                "ordering_key": key,
                "lane_seq": seq,
            },
        )
        for delivery_id, key, seq in zip(ids, ["a", ""], [2**40, 0], strict=True)
    ]
    sql, params = rowsql.insert_rows(rows)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)

    stored = Delivery.objects.values_list(
        "id", "ordering_key", "lane_seq", "status", "created_at"
    )
    assert sorted(stored) == sorted(
        [(ids[0], "a", 2**40, "pending", now), (ids[1], "", 0, "pending", now)]
    )
