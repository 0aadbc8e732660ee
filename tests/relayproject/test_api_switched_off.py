"""A merchant switched off by staff acts through no key: its own keys get a
403 on every route, platform keys a 403 on every write for it; platform
keys may still read it."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from deliveries.pull.sessions import session_start
from deliveries.services import event_publish
from endpoints.models import Merchant
from relayproject.api import api
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.django_db

# Operations that act for no merchant: the catalogue and operational
# endpoints (platform keys only) and creating a merchant.
NO_MERCHANT = ("/api/v1/merchants", "/api/v1/event-types", "/api/v1/operational-")
# Public keys, listed without any key (CONTRACT section 9): no key to refuse.
KEYLESS = {("get", "/api/v1/merchants/{slug}/signing-keys")}
BODIES = {
    "/api/v1/merchants/{slug}/endpoints": {"url": "http://127.0.0.1:9/hook"},
    "/api/v1/merchants/{slug}/endpoints/{endpoint_id}": {"description": "x"},
    "/api/v1/merchants/{slug}/endpoints/{endpoint_id}/recover": {
        "since": "2020-01-01T00:00:00Z"
    },
    "/api/v1/merchants/{slug}/endpoints/{endpoint_id}/verify": {"challenge": "x"},
    "/api/v1/merchants/{slug}/endpoints/{endpoint_id}/messages/ack": {"ids": ["x"]},
    "/api/v1/merchants/{slug}/endpoints/{endpoint_id}/messages/nack": {"ids": ["x"]},
    "/api/v1/merchants/{slug}/listen-sessions": {"description": "x"},
    "/api/v1/events": {"merchant": "acme", "type": "a.b", "data": {}},
    "/api/v1/events/batch": {
        "events": [
            {"merchant": "globex", "type": "a.b", "data": {}},
            {"merchant": "acme", "type": "a.b", "data": {}},
        ]
    },
}
# Where a publish says which merchant was refused.
LOCS = {
    "/api/v1/events": ["body", "merchant"],
    "/api/v1/events/batch": ["body", "events", 1, "merchant"],
}


def _routes(*, writes: bool | None = None, for_merchant: bool = False) -> list:
    routes = []
    for path, operations in api.get_openapi_schema()["paths"].items():
        for method in operations:
            if writes is not None and (method != "get") != writes:
                continue
            if for_merchant and (path.startswith(NO_MERCHANT) and "{slug}" not in path):
                continue
            if (method, path) in KEYLESS:
                continue
            routes.append((method, path))
    return routes


def _url(path: str, ids: dict) -> str:
    # Where a route takes only its own kind of endpoint, one of that kind.
    if "/messages" in path:
        ids = {**ids, "endpoint_id": ids["pull_id"]}
    elif "/listen-sessions/" in path:
        ids = {**ids, "endpoint_id": ids["session_id"]}
    url = path.removeprefix("/api/v1").format(**ids)
    return url + "?merchant=acme" if url == "/deliveries" else url


def _refused_as_switched_off(response, loc: list | None = None) -> None:
    body = assert_problem(response, 403, loc)
    assert "Merchant 'acme' is switched off by staff" in body["detail"]


@pytest.fixture
def acme_ids(merchant, other_merchant) -> dict:
    """acme's objects (a dead delivery, to replay), then acme switched off."""
    endpoint = factories.endpoint(merchant)
    factories.endpoint(other_merchant)
    event = event_publish(merchant=merchant, type="a.b", data={})
    delivery = event.created_deliveries[0]
    Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.DEAD)
    pull = factories.endpoint(merchant, url="", kind="pull")
    session = session_start(merchant=merchant, now=utcnow())
    Merchant.objects.filter(pk=merchant.pk).update(is_active=False)
    return {
        "slug": "acme",
        "endpoint_id": endpoint.pk,
        "event_id": event.pk,
        "delivery_id": delivery.pk,
        "name": "a.b",
        "pull_id": pull.pk,
        "session_id": session.pk,
    }


def test_the_routes_for_a_merchant_are_those_of_the_contract():
    # Each names acme: by its slug, an object of its, or its slug in the body
    # (PATCH /merchants/{slug}: its retry policy defaults). Section 8 adds
    # ack, nack, starting and ending a listen session (writes), and pulling
    # (which leases nothing while the merchant is off) and reading sessions.
    assert len(_routes(writes=True, for_merchant=True)) == 16
    assert len(_routes(writes=False, for_merchant=True)) == 9


@pytest.mark.parametrize(("method", "path"), _routes())
def test_its_own_key_is_refused_on_every_route(scoped, acme_ids, method, path):
    before = row_counts()
    response = scoped.call(method.upper(), _url(path, acme_ids), BODIES.get(path))
    _refused_as_switched_off(response)
    assert row_counts() == before


@pytest.mark.parametrize(("method", "path"), _routes(writes=True, for_merchant=True))
def test_a_platform_key_may_not_write_for_it(platform, acme_ids, method, path):
    before = row_counts()
    response = platform.call(method.upper(), _url(path, acme_ids), BODIES.get(path))
    _refused_as_switched_off(response, LOCS.get(path))
    assert row_counts() == before


@pytest.mark.parametrize(("method", "path"), _routes(writes=False, for_merchant=True))
def test_a_platform_key_may_still_read_it(platform, acme_ids, method, path):
    response = platform.call(method.upper(), _url(path, acme_ids))
    assert response.status_code == 200, response.content


def test_a_keyed_publish_is_refused_too(platform, acme_ids):
    before = row_counts()
    response = platform.post(
        "/events", BODIES["/api/v1/events"], headers={"Idempotency-Key": "k1"}
    )
    _refused_as_switched_off(response, ["body", "merchant"])
    assert row_counts() == before


def test_publishing_stops_at_once_and_resumes_at_once(platform, merchant):
    factories.endpoint(merchant)
    body = BODIES["/api/v1/events"]
    assert platform.post("/events", body).status_code == 201  # its audience cached

    Merchant.objects.filter(pk=merchant.pk).update(is_active=False)
    _refused_as_switched_off(platform.post("/events", body), ["body", "merchant"])

    Merchant.objects.filter(pk=merchant.pk).update(is_active=True)
    assert platform.post("/events", body).status_code == 201
