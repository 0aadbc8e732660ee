"""An unknown query parameter is a 422 naming it, on every route of the OpenAPI document."""

from __future__ import annotations

import pytest

from deliveries.services import event_publish
from relayproject.api import api
from tests.support import factories
from tests.support.api import Api, assert_problem, row_counts

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

BODIES = {
    "/api/v1/merchants": {"slug": "initech", "name": "Initech"},
    "/api/v1/merchants/{slug}/endpoints": {"url": "http://127.0.0.1:9/hook"},
    "/api/v1/events": {"merchant": "acme", "type": "a.b", "data": {}},
    "/api/v1/events/batch": {
        "events": [{"merchant": "acme", "type": "a.b", "data": {}}]
    },
    "/api/v1/event-types": {"name": "order.made"},
    "/api/v1/operational-endpoints": {"url": "http://127.0.0.1:9/hook"},
}


def _routes() -> list[tuple[str, str]]:
    return [
        (method, path)
        for path, operations in api.get_openapi_schema()["paths"].items()
        for method in operations
    ]


@pytest.fixture
def ids(merchant):
    endpoint = factories.endpoint(merchant)
    event = event_publish(merchant=merchant, type="a.b", data={})
    return {
        "slug": merchant.slug,
        "endpoint_id": endpoint.pk,
        "event_id": event.pk,
        "delivery_id": event.created_deliveries[0].pk,
        "name": "a.b",
    }


def test_the_document_lists_every_route():
    # A route the document left out would be left out of the test below.
    assert len(_routes()) >= 25


@pytest.mark.parametrize(("method", "path"), _routes())
def test_an_unknown_query_parameter_is_a_422_naming_it(platform, ids, method, path):
    url = path.removeprefix("/api/v1").format(**ids) + "?no_such_thing=1"
    before = row_counts()

    response = platform.call(method.upper(), url, BODIES.get(path))

    body = assert_problem(response, 422, ["query", "no_such_thing"])
    assert "no_such_thing" in body["detail"]
    assert row_counts() == before


def test_a_misspelt_filter_is_named_not_ignored(platform, ids):
    # ?endpoint= used to list every endpoint's deliveries.
    response = platform.get(f"/deliveries?endpoint={ids['endpoint_id']}&status=dead")

    body = assert_problem(response, 422, ["query", "endpoint"])
    assert [e["loc"] for e in body["errors"]] == [["query", "endpoint"]]
    assert "endpoint_id" in body["detail"]  # what it takes instead


def test_every_unknown_name_is_named_at_once(platform):
    response = platform.get("/merchants/acme/endpoints?b=1&a=2&limit=5")

    body = assert_problem(response, 422)
    assert [e["loc"] for e in body["errors"]] == [["query", "a"], ["query", "b"]]


def test_declared_parameters_still_work(platform, ids):
    response = platform.get(
        f"/deliveries?status=pending&merchant=acme&endpoint_id={ids['endpoint_id']}"
        "&cursor=&limit=5"
    )
    assert response.status_code == 200, response.content
    assert [d["id"] for d in response.json()["items"]] == [ids["delivery_id"]]
    assert platform.get("/merchants/acme/endpoints?limit=1").status_code == 200


def test_without_a_key_the_answer_is_still_401(merchant):
    response = Api(None).get("/deliveries?no_such_thing=1")
    assert_problem(response, 401)
