"""Idempotency-Key: a retry never makes a second event, even when requests race."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from deliveries.models import Event
from deliveries.publish import ingest
from tests.support import factories
from tests.support.api import Api, api_as, assert_problem

EVENT = {"merchant": "acme", "type": "order.created", "data": {"n": 1}}
KEY = {"Idempotency-Key": "order-1"}


@pytest.mark.django_db
def test_same_key_and_body_replays_the_original_event(platform, merchant):
    factories.endpoint(merchant)
    first = platform.post("/events", EVENT, headers=KEY)
    again = platform.post("/events", EVENT, headers=KEY)
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Event.objects.count() == 1


@pytest.mark.django_db
def test_key_order_in_data_does_not_change_the_fingerprint(platform, merchant):
    platform.post("/events", {**EVENT, "data": {"a": 1, "b": 2}}, headers=KEY)
    again = platform.post("/events", {**EVENT, "data": {"b": 2, "a": 1}}, headers=KEY)
    assert again.status_code == 200


@pytest.mark.django_db
def test_keys_are_scoped_to_the_api_keys_merchant(platform, scoped, merchant):
    platform.post("/events", EVENT, headers=KEY)
    other_scope = scoped.post("/events", EVENT, headers=KEY)
    assert other_scope.status_code == 201
    assert Event.objects.count() == 2


def _hold_key_in_progress(merchant, started, release):
    """Publish with KEY in a transaction that stays open until release is set."""
    try:
        with transaction.atomic():
            ingest.event_ingest(
                merchant=merchant.slug,
                type=EVENT["type"],
                data=EVENT["data"],
                key=KEY["Idempotency-Key"],
                scope="platform",
            )
            started.set()
            release.wait(timeout=10)
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_key_still_in_progress_answers_409(on_postgres, merchant):
    api = api_as(None)
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_hold_key_in_progress, args=(merchant, started, release)
    )
    holder.start()
    assert started.wait(timeout=10)
    try:
        response = api.post("/events", EVENT, headers=KEY)
    finally:
        release.set()
        holder.join()
    assert_problem(response, 409)
    assert api.post("/events", EVENT, headers=KEY).status_code == 200
    assert Event.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_requests_with_one_key_make_one_event(on_postgres, merchant):
    factories.endpoint(merchant)
    clients = [api_as(None), api_as(None)]
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def post(api: Api) -> None:
        try:
            barrier.wait(timeout=10)
            statuses.append(api.post("/events", EVENT, headers=KEY).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) in ([200, 201], [201, 409])
    assert Event.objects.filter(idempotency_key="order-1").count() == 1
