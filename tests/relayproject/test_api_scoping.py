"""A scoped key sees another merchant's objects as 404, on every route."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from deliveries.pull.sessions import session_start
from deliveries.services import event_publish
from relayproject.api import api
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.django_db

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
    "/api/v1/events": {"merchant": "globex", "type": "a.b", "data": {}},
    "/api/v1/events/batch": {
        "events": [
            {"merchant": "acme", "type": "a.b", "data": {}},
            {"merchant": "globex", "type": "a.b", "data": {}},
        ]
    },
}
# Query filters that name another merchant's objects are refused the same way.
QUERIES = {
    "/api/v1/deliveries": ["merchant=globex", "endpoint_id={endpoint_id}"],
}
OPERATIONAL = "/api/v1/operational-endpoints"
# Creating merchants is refused to every scoped key (403), tested on its own;
# the event-type catalogue is shared by all merchants (tests/endpoints/test_catalogue.py).
NOT_SCOPED = {
    ("post", "/api/v1/merchants"),
    ("get", "/api/v1/event-types"),
    ("post", "/api/v1/event-types"),
    ("get", "/api/v1/event-types/{name}"),
    ("patch", "/api/v1/event-types/{name}"),
    ("delete", "/api/v1/event-types/{name}"),
    # Operational endpoints: platform keys only (403), tests/deliveries/notifications/test_api.py.
    ("post", OPERATIONAL),
    ("get", OPERATIONAL),
    ("get", OPERATIONAL + "/{endpoint_id}"),
    ("patch", OPERATIONAL + "/{endpoint_id}"),
    ("delete", OPERATIONAL + "/{endpoint_id}"),
    ("post", OPERATIONAL + "/{endpoint_id}/rotate-secret"),
    # Public keys, listed without any key (CONTRACT section 9):
    # tests/endpoints/test_signing_keys.py.
    ("get", "/api/v1/merchants/{slug}/signing-keys"),
}


def _routes() -> list[tuple[str, str, str]]:
    routes = []
    for path, operations in api.get_openapi_schema()["paths"].items():
        for method in operations:
            if (method, path) in NOT_SCOPED:
                continue
            queries = QUERIES.get(path) if method == "get" else None
            for query in queries or [""]:
                routes.append((method, path, query))
    return routes


@pytest.fixture
def globex_ids(other_merchant):
    endpoint = factories.endpoint(other_merchant)
    event = event_publish(merchant=other_merchant, type="a.b", data={})
    delivery = event.created_deliveries[0]
    Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.DEAD)
    return {
        "slug": "globex",
        "endpoint_id": endpoint.pk,
        "event_id": event.pk,
        "delivery_id": delivery.pk,
        # Where a route takes only its own kind of endpoint, one of that kind,
        # so a 404 there says "not yours", not "not a pull endpoint".
        "pull_id": factories.endpoint(other_merchant, url="", kind="pull").pk,
        "session_id": session_start(merchant=other_merchant, now=utcnow()).pk,
    }


def _url(path: str, ids: dict) -> str:
    if "/messages" in path:
        ids = {**ids, "endpoint_id": ids["pull_id"]}
    elif "/listen-sessions/" in path:
        ids = {**ids, "endpoint_id": ids["session_id"]}
    return path.removeprefix("/api/v1").format(**ids)


def test_every_route_names_another_merchants_object():
    routes = _routes()
    # The merchant-scoped operations of CONTRACT section 3, PATCH
    # /merchants/{slug} (a merchant's retry policy defaults), and section 8's
    # messages (pull, ack, nack) and listen sessions (start, list, get, end).
    assert len({(method, path) for method, path, _ in routes}) == 25
    for _, path, query in routes:
        assert "{" in path or query or path in BODIES, path


@pytest.mark.parametrize(("method", "path", "query"), _routes())
def test_scoped_key_gets_404_for_another_merchants_objects(
    scoped, globex_ids, method, path, query
):
    url = _url(path, globex_ids)
    if query:
        url += "?" + query.format(**globex_ids)
    before = row_counts()
    response = scoped.call(method.upper(), url, BODIES.get(path))
    assert_problem(response, 404)
    assert row_counts() == before
