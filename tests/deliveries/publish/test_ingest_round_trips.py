"""Round trips per publish, counted on a real PostgreSQL connection.

Each statement Django sends is one round trip, and Django records BEGIN,
COMMIT and ROLLBACK too: a plain publish through the API has none (it runs
outside a transaction; its one write statement is atomic on its own), an
idempotent one runs in a transaction (its lock must outlive a statement).
An API publish also takes its events' tokens from the merchant's publish
bucket (deliveries/publish/rate.py): in its writing statement, or for an
idempotent publish in a statement of its own; in-process publishing does
not. A regression that adds a query fails here.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from deliveries.models import Delivery, Event, PublishBucket
from deliveries.services import EventInput, event_publish, events_publish
from endpoints.models import Merchant
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import api_as, assert_problem
from tests.support.processes import dispatcher_database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

EVENT = {"merchant": "acme", "type": "order.created", "data": {"n": 1}}


@pytest.fixture
def acme(on_postgres, settings):
    # A cached key must outlive a slow request on a loaded machine, or a
    # "warm" request reads the key again (its expiry is tested elsewhere).
    settings.API_KEY_CACHE_SECONDS = 3600
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    factories.endpoint(merchant, event_types=["order.*"])
    factories.endpoint(merchant, event_types=["invoice.*"])  # not this event's
    # The schema cache (endpoints/catalogue.py) is read once per process every
    # CACHE_SECONDS, like the key cache: warm, a publish never reads it.
    from endpoints.catalogue import schema_problems

    schema_problems(type="order.created", data={})
    return merchant


TRANSACTION = {"BEGIN", "COMMIT", "ROLLBACK"}


def _sql(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries]


def _statements(queries: list[str]) -> list[str]:
    return [q for q in queries if q not in TRANSACTION]


def _post(api, path, body, **kwargs):
    with CaptureQueriesContext(connection) as captured:
        response = api.post(path, body, **kwargs)
    return response, _sql(captured)


def test_a_single_publish_is_one_statement_once_key_and_audience_are_cached(acme):
    api = api_as(None)
    first, cold = _post(api, "/events", EVENT)
    second, warm = _post(api, "/events", EVENT)

    assert first.status_code == second.status_code == 201
    assert len(second.json()["deliveries"]) == 2
    # Key (read and touched in one statement), merchant with its endpoints,
    # then the publish bucket, the event, its deliveries and the NOTIFY in
    # one statement.
    assert len(cold) == 3, cold
    # Warm: that one statement, which also checks the cached audience holds.
    # One statement outside a transaction: one commit, one WAL flush.
    assert len(warm) == 1, warm
    assert "deliveries_publishbucket" in warm[0]
    assert "pg_notify" in warm[0]
    assert Delivery.objects.count() == 4


def _disable(endpoint):
    endpoint_update(endpoint=endpoint, is_active=False, now=utcnow())


def _resubscribe(endpoint):
    endpoint_update(endpoint=endpoint, event_types=["invoice.*"], now=utcnow())


def _add(endpoint):
    factories.endpoint(endpoint.merchant, event_types=["order.created"])


@pytest.mark.parametrize(
    ("change", "receivers"), [(_disable, 1), (_resubscribe, 1), (_add, 3)]
)
def test_an_endpoint_changed_after_caching_is_seen_by_the_next_publish(
    acme, change, receivers
):
    api = api_as(None)
    _post(api, "/events", EVENT)  # caches the key and acme's audience
    change(acme.endpoints.get(event_types=[]))  # one of the two receivers
    response, queries = _post(api, "/events", EVENT)

    assert response.status_code == 201
    assert len(response.json()["deliveries"]) == receivers
    # The write (with the bucket) found the cached audience stale and wrote
    # and took nothing, then the audience was read again and the write
    # repeated.
    assert len(queries) == 3, queries
    assert Event.objects.count() == 2
    assert Delivery.objects.count() == 2 + receivers


def test_a_publish_that_finds_its_cached_audience_changed_takes_one_token(acme):
    Merchant.objects.filter(pk=acme.pk).update(
        publish_rate_per_second=0.0001, publish_burst=10
    )
    api = api_as(None)
    _post(api, "/events", EVENT)  # caches the key and acme's audience
    _add(acme.endpoints.get(event_types=[]))
    response, _ = _post(api, "/events", EVENT)

    assert response.status_code == 201
    # The first try of the write wrote nothing and took nothing.
    assert PublishBucket.objects.get().tokens == pytest.approx(8, abs=0.01)


def test_a_merchant_deleted_after_caching_is_unknown(acme):
    api = api_as(None)
    _post(api, "/events", EVENT)
    acme.delete()
    response, _ = _post(api, "/events", EVENT)

    assert_problem(response, 404, ["body", "merchant"])


def test_an_idempotent_publish_is_three_statements_and_a_replay_three(acme):
    api = api_as(None)
    api.get("/merchants/acme")  # warms the key cache
    key = {"Idempotency-Key": "order-1"}
    created, new = _post(api, "/events", EVENT, headers=key)
    replayed, again = _post(api, "/events", EVENT, headers=key)
    mismatch, other = _post(api, "/events", {**EVENT, "data": {"n": 2}}, headers=key)

    assert created.status_code == 201
    assert replayed.status_code == 200
    assert replayed.json() == created.json()
    assert_problem(mismatch, 422, ["header", "Idempotency-Key"])
    for queries in (new, again, other):
        assert queries[0] == "BEGIN" and queries[-1] == "COMMIT", queries
    # The merchant with the key's lock, the write, then (the key was new)
    # the bucket.
    assert len(_statements(new)) == 3, new
    assert "deliveries_publishbucket" in _statements(new)[2]
    # A replay: the lock, the write that writes nothing, the stored event
    # with its deliveries; no token.
    assert len(_statements(again)) == 3, again
    assert len(_statements(other)) == 3, other
    assert Event.objects.count() == 1


def test_a_batch_of_any_size_and_merchants_is_two_statements_then_one(acme):
    globex = factories.merchant("globex")
    factories.endpoint(globex)
    api = api_as(None)
    api.get("/merchants/acme")  # warms the key cache
    events = [
        {**EVENT, "merchant": "acme" if n % 3 else "globex", "data": {"n": n}}
        for n in range(300)
    ]
    response, queries = _post(api, "/events/batch", {"events": events})
    again, warm = _post(api, "/events/batch", {"events": events})

    assert response.status_code == again.status_code == 201
    # The merchants with their endpoints, then both buckets and everything
    # else in one statement; with both audiences cached, that one.
    assert len(queries) == 2, queries
    assert len(warm) == 1, warm
    assert Event.objects.count() == 600
    assert Delivery.objects.count() == 2 * (200 * 2 + 100)


def test_a_refused_batch_costs_one_read_and_writes_nothing(acme):
    api = api_as(None)
    api.get("/merchants/acme")
    events = [EVENT, {**EVENT, "data": {"big": "x" * 300_000}}, EVENT]
    response, queries = _post(api, "/events/batch", {"events": events})

    assert_problem(response, 422, ["body", "events", 1, "data"])
    assert len(queries) == 1, queries
    assert not Event.objects.exists()


def test_in_process_publish_reads_the_audience_once_and_notifies_once(acme):
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        event_publish(merchant=acme, type="order.created", data={"n": 1})
        events_publish(
            merchant=acme,
            events=[EventInput("order.created", {"n": n}) for n in range(3)],
        )
    queries = _sql(captured)

    assert queries[0] == "BEGIN" and queries[-1] == "COMMIT"
    queries = _statements(queries)
    # acme's endpoints, the first write (with the NOTIFY), the second write.
    assert len(queries) == 3, queries
    assert sum("pg_notify" in q or "NOTIFY" in q for q in queries) == 1
    assert Delivery.objects.count() == 8


def test_an_endpoint_added_in_the_callers_transaction_gets_the_event(acme):
    event_publish(merchant=acme, type="order.created", data={})  # cached
    with transaction.atomic():
        added = factories.endpoint(acme, event_types=["order.created"])
        event = event_publish(merchant=acme, type="order.created", data={})

    assert added.pk in {d.endpoint_id for d in event.created_deliveries}
    assert Delivery.objects.filter(event=event).count() == 3


def _notifications_after(publish) -> list:
    """NOTIFYs a listener gets for what publish() commits."""
    with psycopg.connect(dispatcher_database_url(), autocommit=True) as listener:
        listener.execute("LISTEN relay_deliveries")
        publish()
        return list(listener.notifies(timeout=1, stop_after=1))


def test_a_notify_lost_with_a_rolled_back_savepoint_is_sent_again(acme):
    def publish() -> None:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    event_publish(merchant=acme, type="order.created", data={})
                    raise RuntimeError("the caller's step failed")
            except RuntimeError:
                pass
            event_publish(merchant=acme, type="order.created", data={})

    assert len(_notifications_after(publish)) == 1
    assert Event.objects.count() == 1


def test_a_key_in_progress_is_409_after_one_statement(acme):
    from deliveries.publish import ingest

    api = api_as(None)
    api.get("/merchants/acme")
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                ingest.event_ingest(
                    merchant="acme",
                    type="order.created",
                    data={"n": 1},
                    key="order-1",
                    scope="platform",
                )
                started.set()
                release.wait(timeout=10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert started.wait(timeout=10)
    try:
        response, queries = _post(
            api, "/events", EVENT, headers={"Idempotency-Key": "order-1"}
        )
    finally:
        release.set()
        holder.join()
    assert_problem(response, 409)
    assert queries == ["BEGIN", queries[1], "ROLLBACK"], queries
