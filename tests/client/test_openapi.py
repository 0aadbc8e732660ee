"""The client cannot drift from the server: the live OpenAPI document is
checked against it, and every operation is called through it."""

from __future__ import annotations

import copy
import json
import urllib.request
import uuid
from urllib.parse import urlsplit

import pytest
from webhook_relay_client import Client, ProblemError, urllib_transport

from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint, Merchant
from tests.client.openapi_check import (
    all_operations,
    coverage_problems,
    operations_made,
)

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture(scope="module")
def document(relay) -> dict:
    with urllib.request.urlopen(relay.url("/api/v1/openapi.json"), timeout=30) as r:
        return json.load(r)


def test_the_client_covers_every_operation_of_the_live_document(document):
    assert len(all_operations(document)) > 25
    assert coverage_problems(document) == []


# The check itself, on the live document changed as a server change would.


def test_an_operation_added_to_the_server_is_named(document):
    grown = copy.deepcopy(document)
    grown["paths"]["/api/v1/replays"] = {"post": {"responses": {}}}
    grown["paths"]["/api/v1/events"]["get"] = {"responses": {}}
    assert coverage_problems(grown) == [
        "GET /api/v1/events: no Client method makes this request",
        "POST /api/v1/replays: no Client method makes this request",
    ]


def test_a_parameter_or_field_added_to_an_operation_is_named(document):
    grown = copy.deepcopy(document)
    listing = grown["paths"]["/api/v1/deliveries"]["get"]
    listing["parameters"].append({"in": "query", "name": "type", "required": False})
    grown["components"]["schemas"]["EventIn"]["properties"]["delay_seconds"] = {}
    grown["components"]["schemas"]["MerchantOut"]["properties"]["plan"] = {}
    problems = coverage_problems(grown)
    assert (
        "GET /api/v1/deliveries: list_deliveries() does not send query parameter 'type'"
        in problems
    )
    assert (
        "POST /api/v1/events: publish() does not send body field 'delay_seconds'"
        in problems
    )
    assert "GET /api/v1/merchants/{slug}: Merchant lacks the answer's field 'plan'" in (
        problems
    )


def test_a_client_method_that_drops_an_argument_is_named(document):
    class Forgetful(Client):
        def get_endpoint(self, merchant: str, endpoint_id: str):
            return self._get(f"/merchants/{merchant}/endpoints/ep_fixed", None)

    problems = coverage_problems(document, Forgetful)
    assert problems == [
        "GET /api/v1/merchants/{slug}/endpoints/{endpoint_id}: get_endpoint() "
        "does not send path parameter 'endpoint_id'",
        "GET /api/v1/merchants/{slug}/endpoints/{endpoint_id}: get_endpoint() "
        "answers with no dataclass of models",
    ]


class Recording:
    """The default transport, keeping each request's method and path."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def __call__(self, method, url, headers, body, timeout):
        self.sent.append((method, urlsplit(url).path))
        return urllib_transport(method, url, headers, body, timeout)


def test_every_operation_answers_in_the_shape_the_client_reads(
    relay, transactional_db, document
):
    recording = Recording()
    _, key = apikey_create(name="client library")
    c = Client(relay.url("/"), key, transport=recording)
    slug = f"tour-{uuid.uuid4().hex[:8]}"

    assert c.create_merchant(slug=slug, name="Tour").slug == slug
    assert c.get_merchant(slug).name == "Tour"
    assert c.update_merchant(slug, retry_schedule=[5, 30]).retry_schedule == [5, 30]
    endpoint = c.create_endpoint(slug, url=HOOK, description="tour")
    assert [e.id for e in c.list_endpoints(slug)] == [endpoint.id]
    assert c.get_endpoint(slug, endpoint.id).verification.state
    assert c.update_endpoint(slug, endpoint.id, ordered=True).ordered is True
    signed = c.update_endpoint(slug, endpoint.id, signing="both")
    [key_set] = c.list_signing_keys(slug).keys
    assert (key_set.endpoint_id, key_set.public_key) == (endpoint.id, signed.public_key)
    rotated = c.rotate_secret(slug, endpoint.id)
    assert rotated.secret.startswith("whsec_") and rotated.secret not in repr(rotated)
    for call in (
        lambda: c.retry_verification(slug, endpoint.id),
        lambda: c.verify_endpoint(slug, endpoint.id, challenge="vrfy_x"),
    ):
        with pytest.raises(ProblemError) as raised:
            call()
        assert raised.value.status == 409  # not awaiting verification
    recovered = c.recover_deliveries(
        slug, endpoint.id, since="2020-01-01T00:00:00Z", dry_run=True
    )
    assert recovered.count == 0
    link = c.create_portal_session(slug, role="developer")
    assert link.url.startswith("http://") and link.url not in repr(link)

    name = f"tour{uuid.uuid4().hex[:8]}.done"
    made = c.create_event_type(name=name, schema={"type": "object"}, example={})
    assert made.schema == {"type": "object"}
    assert name in [t.name for t in c.list_event_types()]
    assert c.get_event_type(name).deprecated is False
    assert c.update_event_type(name, deprecated=True, example=None).deprecated
    c.delete_event_type(name)

    event = c.publish(merchant=slug, type="order.paid", data={"n": 1})
    detail = c.get_event(event.id)
    assert (detail.data, detail.deliveries) == ({"n": 1}, event.deliveries)
    delivery = next(iter(c.list_deliveries(merchant=slug)))
    assert c.get_delivery(delivery.id).attempts == ()
    with pytest.raises(ProblemError) as raised:
        c.replay_delivery(delivery.id)  # pending: nothing to send again yet
    assert raised.value.status == 409
    assert c.publish_batch([{"merchant": slug, "type": "a.b", "data": {}}])[0].id
    c.delete_endpoint(slug, endpoint.id)

    pull = c.create_endpoint(slug, kind="pull", visibility_timeout_seconds=60)
    assert (pull.url, pull.visibility_timeout_seconds) == ("", 60)
    session = c.listen_session_create(slug, event_types=["order.*"], description="t")
    assert session.secret.startswith("whsec_") and session.secret not in repr(session)
    assert [s.id for s in c.listen_session_list(slug)] == [session.id]
    c.publish(merchant=slug, type="order.paid", data={"n": 2})
    [message] = c.messages_pull(slug, session.id, limit=5)
    assert c.messages_nack(slug, session.id, [message.id], retry_after_seconds=0)
    [again] = c.messages_pull(slug, session.id)
    assert c.messages_ack(slug, session.id, [again.id]).acked == [again.id]
    c.listen_session_end(slug, session.id, reason="stopped")
    assert c.listen_session_get(slug, session.id).state == "ended"

    ops = c.create_operational_endpoint(url=HOOK, event_types=["relay.*"])
    assert ops.id in [e.id for e in c.list_operational_endpoints()]
    assert c.get_operational_endpoint(ops.id).event_types == ["relay.*"]
    assert c.update_operational_endpoint(ops.id, description="ops").description
    assert c.rotate_operational_secret(ops.id).secret.startswith("whsec_")
    c.delete_operational_endpoint(ops.id)

    assert all_operations(document) - operations_made(document, recording.sent) == set()


def test_broker_endpoints_are_made_and_changed_through_the_client(
    relay, transactional_db
):
    _, key = apikey_create(name="client library")
    c = Client(relay.url("/"), key)
    slug = f"bus-{uuid.uuid4().hex[:8]}"
    c.create_merchant(slug=slug, name="Bus")
    # Staff list the broker for this merchant (the relay's own setting is empty).
    Merchant.objects.filter(slug=slug).update(broker_hosts=["127.0.0.1:5672"])
    password = "Plum-Quokka-7731-zebra"

    endpoint = c.create_endpoint(
        slug,
        kind="rabbitmq",
        url=f"amqp://relay:{password}@127.0.0.1:5672/",
        target={"exchange": "", "routing_key": "orders"},
    )
    # The URL as the answer shows it, given back: *** keeps the stored password.
    changed = c.update_endpoint(
        slug, endpoint.id, url=endpoint.url, target={"routing_key": "billing"}
    )

    assert endpoint.kind == "rabbitmq"
    assert endpoint.url == "amqp://relay:***@127.0.0.1:5672/"
    assert endpoint.has_credentials and password not in repr(endpoint)
    assert (changed.target, changed.has_credentials) == (
        {"routing_key": "billing"},
        True,
    )
    stored = Endpoint.objects.get(pk=endpoint.id).broker_credentials
    assert stored == f"relay:{password}"
    with pytest.raises(ProblemError) as raised:
        c.create_endpoint(
            slug, kind="redis", url="redis://127.0.0.1:6379", target={"stream": "s"}
        )
    assert "not one the operator allows" in raised.value.errors_at("body", "url")[0]
