"""Every operation of CONTRACT section 3: status and shape, platform and scoped keys."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries import selectors
from deliveries.models import Attempt, Delivery
from deliveries.schemas import EventBatchOut, EventOut
from deliveries.services import event_publish
from endpoints.models import EndpointSecret, Merchant
from relayproject.api import api
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import assert_problem

pytestmark = pytest.mark.django_db


def test_platform_key_creates_a_merchant(platform):
    response = platform.post("/merchants", {"slug": "initech", "name": "Initech"})
    assert response.status_code == 201
    assert response.json()["slug"] == "initech"
    assert Merchant.objects.filter(slug="initech", name="Initech").exists()


def test_scoped_key_may_not_create_a_merchant(scoped):
    response = scoped.post("/merchants", {"slug": "initech", "name": "Initech"})
    assert_problem(response, 403)
    assert not Merchant.objects.filter(slug="initech").exists()


def test_merchant_get(any_key, merchant):
    response = any_key.get("/merchants/acme")
    assert response.status_code == 200
    assert response.json()["slug"] == "acme"
    assert response.json()["is_active"] is True


def test_endpoint_create_returns_its_secret_once(any_key, merchant):
    response = any_key.post(
        "/merchants/acme/endpoints",
        {"url": "http://127.0.0.1:9/hook", "event_types": ["payment.*"]},
    )
    assert response.status_code == 201
    body = response.json()
    assert body["secret"].startswith("whsec_")
    assert body["secret"] == EndpointSecret.objects.get(endpoint_id=body["id"]).secret
    assert body["event_types"] == ["payment.*"]
    assert body["merchant"] == "acme"
    shown = any_key.get(f"/merchants/acme/endpoints/{body['id']}").json()
    assert "secret" not in shown


def test_endpoint_list_pages_newest_first(any_key, merchant):
    made = [factories.endpoint(merchant).pk for _ in range(3)]
    first = any_key.get("/merchants/acme/endpoints?limit=2").json()
    second = any_key.get(
        f"/merchants/acme/endpoints?limit=2&cursor={first['next_cursor']}"
    ).json()
    ids = [e["id"] for e in first["items"] + second["items"]]
    assert ids == sorted(made, reverse=True)
    assert second["next_cursor"] is None


def test_endpoint_get(any_key, merchant):
    endpoint = factories.endpoint(merchant)
    response = any_key.get(f"/merchants/acme/endpoints/{endpoint.pk}")
    assert response.status_code == 200
    assert response.json()["id"] == endpoint.pk
    assert response.json()["breaker_state"] == "closed"


def test_endpoint_patch_changes_only_what_is_sent(any_key, merchant):
    endpoint = factories.endpoint(merchant, description="keep me")
    response = any_key.patch(
        f"/merchants/acme/endpoints/{endpoint.pk}",
        {"event_types": ["order.created"], "is_active": False, "max_attempts": 3},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["event_types"] == ["order.created"]
    assert body["is_active"] is False
    assert body["max_attempts"] == 3
    assert body["description"] == "keep me"


def test_max_in_flight_is_set_on_create_changed_by_patch_and_cleared_by_null(
    any_key, merchant
):
    created = any_key.post(
        "/merchants/acme/endpoints",
        {"url": "http://127.0.0.1:9/hook", "max_in_flight": 4},
    ).json()
    assert created["max_in_flight"] == 4
    path = f"/merchants/acme/endpoints/{created['id']}"
    assert any_key.patch(path, {"max_in_flight": 64}).json()["max_in_flight"] == 64
    assert any_key.patch(path, {"max_in_flight": None}).json()["max_in_flight"] is None


@pytest.mark.parametrize("value", [0, 1001, "many"])
def test_max_in_flight_out_of_range_is_a_422_naming_it(any_key, merchant, value):
    endpoint = factories.endpoint(merchant)
    response = any_key.patch(
        f"/merchants/acme/endpoints/{endpoint.pk}", {"max_in_flight": value}
    )
    assert response.status_code == 422
    assert response.headers["Content-Type"] == "application/problem+json"
    assert [e["loc"] for e in response.json()["errors"]] == [["body", "max_in_flight"]]
    endpoint.refresh_from_db()
    assert endpoint.max_in_flight is None


def test_endpoint_delete(any_key, merchant):
    endpoint = factories.endpoint(merchant)
    response = any_key.delete(f"/merchants/acme/endpoints/{endpoint.pk}")
    assert response.status_code == 204
    assert not merchant.endpoints.exists()


def test_rotate_secret_keeps_the_previous_one_signing(any_key, merchant, settings):
    endpoint = factories.endpoint(merchant)
    old = endpoint.secrets.get()
    response = any_key.post(f"/merchants/acme/endpoints/{endpoint.pk}/rotate-secret")
    assert response.status_code == 200
    body = response.json()
    assert body["secret"].startswith("whsec_") and body["secret"] != old.secret
    old.refresh_from_db()
    assert old.expires_at is not None
    overlap = old.expires_at - utcnow()
    assert (
        timedelta(seconds=settings.SECRET_ROTATION_OVERLAP_SECONDS - 60)
        < overlap
        <= timedelta(seconds=settings.SECRET_ROTATION_OVERLAP_SECONDS)
    )


def _dead_delivery(merchant: Merchant) -> Delivery:
    endpoint = factories.endpoint(merchant)
    event = event_publish(merchant=merchant, type="order.created", data={"n": 1})
    delivery = event.created_deliveries[0]
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.DEAD, dead_at=utcnow(), attempt_count=1
    )
    Attempt.objects.create(
        delivery=delivery,
        endpoint=endpoint,
        number=1,
        started_at=utcnow(),
        response_ms=12.5,
        status_code=400,
        error_kind="http_status",
        response_body="bad request",
        outcome=Attempt.Outcome.DEAD,
    )
    return delivery


@pytest.mark.parametrize(
    ("dry_run", "status_after"), [(True, "dead"), (False, "pending")]
)
def test_recover_counts_and_requeues_dead_deliveries(
    any_key, merchant, dry_run, status_after
):
    delivery = _dead_delivery(merchant)
    since = (utcnow() - timedelta(hours=1)).isoformat()
    response = any_key.post(
        f"/merchants/acme/endpoints/{delivery.endpoint_id}/recover",
        {"since": since, "dry_run": dry_run},
    )
    assert response.status_code == 202
    assert response.json() == {"count": 1}
    delivery.refresh_from_db()
    assert delivery.status == status_after


def test_event_create_fans_out_and_lists_the_deliveries(any_key, merchant):
    endpoint = factories.endpoint(merchant, event_types=["order.*"])
    factories.endpoint(merchant, event_types=["refund.*"])
    response = any_key.post(
        "/events", {"merchant": "acme", "type": "order.created", "data": {"n": 1}}
    )
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("evt_")
    assert set(body) == {"id", "type", "merchant", "created_at", "deliveries"}
    assert [(d["endpoint_id"], d["status"]) for d in body["deliveries"]] == [
        (endpoint.pk, "pending")
    ]


def _batch_of_acme_globex_acme(platform, merchant):
    factories.endpoint(merchant)
    factories.endpoint(factories.merchant("globex"))
    events = [
        {"merchant": slug, "type": "order.created", "data": {"i": i}}
        for i, slug in enumerate(["acme", "globex", "acme"])
    ]
    return platform.post("/events/batch", {"events": events})


def test_event_batch_of_several_merchants_in_input_order(platform, merchant):
    response = _batch_of_acme_globex_acme(platform, merchant)
    assert response.status_code == 201
    items = response.json()["items"]
    assert [i["merchant"] for i in items] == ["acme", "globex", "acme"]
    assert all(len(i["deliveries"]) == 1 for i in items)
    assert Delivery.objects.count() == 3


def test_a_batch_answers_the_bytes_its_schema_would_make(platform, merchant):
    # The batch answer is built without the schema (deliveries/api.py): it
    # must be what ninja makes of EventBatchOut, byte for byte.
    factories.endpoint(merchant, event_types=["order.*"])  # two deliveries each
    response = _batch_of_acme_globex_acme(platform, merchant)

    assert response.status_code == 201
    ids = [item["id"] for item in response.json()["items"]]
    stored = {e.pk: e for e in selectors.events_with_deliveries().filter(pk__in=ids)}
    schema = EventBatchOut.model_validate({"items": [stored[i] for i in ids]})
    expected = api.renderer.render(None, schema.model_dump(), response_status=201)
    assert response.content == expected.encode()
    assert response["Content-Type"] == api.get_content_type()


@pytest.mark.parametrize("key", [None, "k-1"], ids=["plain", "idempotent"])
def test_a_single_publish_answers_the_bytes_its_schema_would_make(
    any_key, merchant, key
):
    # Built without the schema too (deliveries/api.py), first time and replay.
    factories.endpoint(merchant, event_types=["order.*"])
    factories.endpoint(merchant)
    headers = {"Idempotency-Key": key} if key else {}
    body = {"merchant": "acme", "type": "order.created", "data": {"n": 1}}
    answers = [any_key.post("/events", body, headers=headers)]
    if key:
        answers.append(any_key.post("/events", body, headers=headers))

    for status, response in zip((201, 200), answers, strict=False):
        assert response.status_code == status, response.content
        stored = selectors.events_with_deliveries().get(pk=response.json()["id"])
        schema = EventOut.model_validate(stored)
        expected = api.renderer.render(
            None, schema.model_dump(), response_status=status
        )
        assert response.content == expected.encode()
        assert response["Content-Type"] == api.get_content_type()
        assert response.get("Idempotent-Replayed") == (
            "true" if status == 200 else None
        )


def test_event_get_shows_data_and_deliveries(any_key, merchant):
    factories.endpoint(merchant)
    event = event_publish(merchant=merchant, type="order.created", data={"n": 7})
    response = any_key.get(f"/events/{event.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["data"] == {"n": 7}
    assert body["deliveries"][0]["id"] == event.created_deliveries[0].pk


def test_delivery_list_filters_by_status(any_key, merchant):
    dead = _dead_delivery(merchant)
    factories.endpoint(merchant)
    event_publish(merchant=merchant, type="other.thing", data={})
    response = any_key.get("/deliveries?status=dead&merchant=acme")
    assert response.status_code == 200
    assert [d["id"] for d in response.json()["items"]] == [dead.pk]


def test_delivery_list_filters_by_endpoint(any_key, merchant):
    one = factories.endpoint(merchant)
    factories.endpoint(merchant)
    event_publish(merchant=merchant, type="order.created", data={})
    items = any_key.get(f"/deliveries?endpoint_id={one.pk}").json()["items"]
    assert [d["endpoint_id"] for d in items] == [one.pk]


def test_delivery_get_lists_attempts(any_key, merchant):
    delivery = _dead_delivery(merchant)
    response = any_key.get(f"/deliveries/{delivery.pk}")
    assert response.status_code == 200
    (attempt,) = response.json()["attempts"]
    assert attempt["status_code"] == 400
    assert attempt["response_ms"] == 12.5
    assert attempt["response_excerpt"] == "bad request"
    assert attempt["error_kind"] == "http_status"


def test_delivery_replay(any_key, merchant):
    delivery = _dead_delivery(merchant)
    response = any_key.post(f"/deliveries/{delivery.pk}/replay")
    assert response.status_code == 202
    assert response.json() == {"id": delivery.pk, "status": "pending"}
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.PENDING


def test_replay_of_a_pending_delivery_is_a_conflict(any_key, merchant):
    factories.endpoint(merchant)
    event = event_publish(merchant=merchant, type="order.created", data={})
    response = any_key.post(f"/deliveries/{event.created_deliveries[0].pk}/replay")
    assert_problem(response, 409)


@pytest.mark.parametrize("microsecond", [0, 5, 999_999])
def test_created_at_reads_the_same_as_the_webhook_body_timestamp(platform, microsecond):
    import json

    from deliveries.signing import serialize_body

    merchant = factories.merchant("stamps")
    created = utcnow().replace(microsecond=microsecond)
    event = event_publish(merchant=merchant, type="a", data={}, now=created)

    shown = platform.get(f"/events/{event.pk}").json()["created_at"]

    body = serialize_body(
        event_id=event.pk, event_type="a", created_at=created, data={}
    )
    assert shown == json.loads(body)["timestamp"]
