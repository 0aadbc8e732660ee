"""Broker endpoints over the REST API: each kind within the operator's broker
hosts, the save-time policy as 422s naming the field, and credentials that
are write-only (answers show the password as ***; no answer, document or
column shows it in clear). Giving *** back: test_brokers_mask.py."""

from __future__ import annotations

import pytest
from django.db import connection

from endpoints.brokers import KINDS
from endpoints.models import Endpoint
from endpoints.schemas import Kind
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.postgres

PASSWORD = "Plum-Quokka-7731-zebra"
URLS = {
    "rabbitmq": f"amqp://relay:{PASSWORD}@127.0.0.1:5672/orders",
    "nats": f"nats://relay:{PASSWORD}@127.0.0.1:4222",
    "redis": f"redis://:{PASSWORD}@127.0.0.1:6379/0",
    "mqtt": f"mqtt://relay:{PASSWORD}@127.0.0.1:1883",
}
TARGETS = {
    "rabbitmq": {"exchange": "", "routing_key": "orders"},
    "nats": {"subject": "orders.paid"},
    "redis": {"stream": "orders", "maxlen": 1000},
    "mqtt": {"topic": "shop/orders"},
}
SHOWN = {
    "rabbitmq": "amqp://relay:***@127.0.0.1:5672/orders",
    "nats": "nats://relay:***@127.0.0.1:4222",
    "redis": "redis://***@127.0.0.1:6379/0",  # a password alone: masked whole
    "mqtt": "mqtt://relay:***@127.0.0.1:1883",
}
ENDPOINTS = "/merchants/acme/endpoints"


@pytest.fixture(autouse=True)
def _loopback_brokers(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq", "nats", "redis", "mqtt"]


def create(api, kind="rabbitmq", **fields):
    body = {
        "kind": kind,
        "url": URLS.get(kind, URLS["rabbitmq"]),
        "target": TARGETS.get(kind, {}),
        **fields,
    }
    return api.post(ENDPOINTS, body)


def test_an_unknown_kind_is_422_on_kind(platform, merchant):
    assert_problem(create(platform, kind="kafka"), 422, ["body", "kind"])


def created(api, kind="rabbitmq", **fields) -> dict:
    response = create(api, kind, **fields)
    assert response.status_code == 201, response.content
    return response.json()


def stored_credentials(endpoint_id: str) -> str | None:
    return Endpoint.objects.get(pk=endpoint_id).broker_credentials


def test_the_schema_offers_exactly_the_kinds_there_are():
    assert Kind.__args__ == KINDS


@pytest.mark.parametrize("kind", sorted(URLS))
def test_each_kind_is_created_at_a_listed_host_its_password_masked(any_key, kind):
    answer = created(any_key, kind)

    assert answer["kind"] == kind
    assert answer["url"] == SHOWN[kind]
    assert answer["target"] == TARGETS[kind]
    assert answer["has_credentials"] is True
    assert answer["secret"].startswith("whsec_")
    user = "" if kind == "redis" else "relay"
    assert stored_credentials(answer["id"]) == f"{user}:{PASSWORD}"


def test_an_http_endpoint_says_http_with_no_target_or_credentials(platform, merchant):
    answer = platform.post(ENDPOINTS, {"url": "http://127.0.0.1:9/hook"}).json()

    assert (answer["kind"], answer["target"], answer["has_credentials"]) == (
        "http",
        {},
        False,
    )


def test_a_host_the_operator_did_not_list_is_422_on_url(platform, merchant, settings):
    settings.RELAY_BROKER_HOSTS = ["mq.example.com"]
    before = row_counts()

    body = assert_problem(create(platform), 422, ["body", "url"])

    assert "not one the operator allows" in body["errors"][0]["msg"]
    assert PASSWORD not in str(body)
    assert row_counts() == before


def test_no_listed_host_means_no_broker_endpoint(platform, merchant, settings):
    settings.RELAY_BROKER_HOSTS = []

    body = assert_problem(create(platform), 422, ["body", "url"])

    assert "RELAY_BROKER_HOSTS" in body["errors"][0]["msg"]


def test_a_merchants_own_list_replaces_the_setting(platform, merchant, settings):
    settings.RELAY_BROKER_HOSTS = []
    merchant.broker_hosts = ["127.0.0.1:5672"]
    merchant.save()

    assert create(platform).status_code == 201
    assert_problem(create(platform, "redis"), 422, ["body", "url"])  # port 6379
    merchant.broker_hosts = []
    merchant.save()
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    assert_problem(create(platform), 422, ["body", "url"])


def test_a_name_resolving_to_a_private_address_is_422_unless_listed_itself(
    platform, merchant, settings
):
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    settings.RELAY_BROKER_HOSTS = ["localhost", "127.0.0.2"]
    url = f"amqp://relay:{PASSWORD}@localhost:5672/"

    body = assert_problem(create(platform, url=url), 422, ["body", "url"])
    assert "private or loopback" in body["errors"][0]["msg"]
    assert PASSWORD not in str(body)
    assert_problem(create(platform), 422, ["body", "url"])  # 127.0.0.1: not listed
    # The operator listed the loopback address itself: that is its choice.
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1:5672"]
    assert create(platform).status_code == 201


@pytest.mark.parametrize(
    ("offered", "words"),
    [([], "turned off"), (["redis"], "not offered")],
)
def test_a_kind_the_operator_does_not_offer_is_422_on_kind(
    platform, merchant, settings, offered, words
):
    settings.RELAY_BROKER_KINDS = offered

    body = assert_problem(create(platform), 422, ["body", "kind"])

    assert words in body["errors"][0]["msg"]
    assert Endpoint.objects.count() == 0


@pytest.mark.parametrize(
    ("kind", "target", "loc"),
    [
        ("rabbitmq", {}, ["body", "target", "routing_key"]),
        ("rabbitmq", {"routing_key": "k", "queue": "q"}, ["body", "target", "queue"]),
        ("nats", {"subject": "orders.*"}, ["body", "target", "subject"]),
        ("nats", {}, ["body", "target", "subject"]),
        ("redis", {"stream": "s", "maxlen": 0}, ["body", "target", "maxlen"]),
        ("mqtt", {"topic": "shop/#"}, ["body", "target", "topic"]),
    ],
)
def test_a_bad_target_is_422_naming_its_field(platform, merchant, kind, target, loc):
    assert_problem(create(platform, kind, target=target), 422, loc)
    assert Endpoint.objects.count() == 0


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"url": "https://127.0.0.1/hook"}, ["body", "url"]),  # not amqp://
        ({"url": f"amqp://relay:{PASSWORD}@127.0.0.1/?x=1"}, ["body", "url"]),
        ({"permanent_statuses": [404]}, ["body", "permanent_statuses"]),
    ],
)
def test_broker_fields_that_do_not_fit_the_kind_are_422(
    platform, merchant, fields, loc
):
    body = assert_problem(create(platform, **fields), 422, loc)
    assert PASSWORD not in str(body)


def test_an_http_endpoint_takes_no_target(platform, merchant):
    response = platform.post(
        ENDPOINTS, {"url": "http://127.0.0.1:9/hook", "target": {"topic": "x"}}
    )
    assert_problem(response, 422, ["body", "target"])


def test_the_password_is_in_no_answer_document_or_clear_column(platform, merchant):
    answers = [create(platform)]
    endpoint_id = answers[0].json()["id"]
    path = f"{ENDPOINTS}/{endpoint_id}"
    answers += [
        platform.get(path),
        platform.get(ENDPOINTS),
        platform.patch(path, {"description": "orders"}),
        platform.patch(path, {"url": URLS["rabbitmq"]}),
        platform.patch(path, {"target": {"routing_key": "other"}}),
        platform.post(f"{path}/rotate-secret"),
        platform.get("/openapi.json"),
    ]

    for answer in answers:
        assert answer.status_code in (200, 201), answer.content
        assert PASSWORD not in answer.content.decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT url, target::text, broker_credentials FROM endpoints_endpoint"
        )
        [(url, target, credentials)] = cursor.fetchall()
    assert PASSWORD not in url + target + credentials
    assert credentials.startswith("gAAAA")  # a Fernet token
    assert stored_credentials(endpoint_id) == f"relay:{PASSWORD}"


def test_the_openapi_document_describes_the_new_fields(platform):
    schemas = platform.get("/openapi.json").json()["components"]["schemas"]

    for name in ("EndpointIn", "EndpointPatch"):
        fields = schemas[name]["properties"]
        assert "broker" in fields["kind"]["description"]
        assert "show the password as `***`" in fields["url"]["description"]
        assert "routing_key" in fields["target"]["description"]
    answer = schemas["EndpointOut"]["properties"]
    assert "password is shown as `***`" in answer["url"]["description"]
    assert "never shown" in answer["has_credentials"]["description"]


def test_a_url_given_again_without_credentials_keeps_them_on_the_same_broker(
    platform, merchant
):
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"

    # No user:password@ at all, on the same broker (another vhost too).
    answer = platform.patch(path, {"url": "amqp://127.0.0.1:5672/billing"}).json()

    assert answer["has_credentials"] is True
    assert answer["url"] == "amqp://relay:***@127.0.0.1:5672/billing"
    assert stored_credentials(endpoint["id"]) == f"relay:{PASSWORD}"


@pytest.mark.parametrize(
    "url",
    [
        "amqp://localhost:5672/orders",  # another host
        "amqp://127.0.0.1:5673/orders",  # another port
        "amqps://127.0.0.1:5672/orders",  # another scheme
    ],
)
def test_credentials_never_follow_an_endpoint_to_another_broker(
    platform, merchant, settings, url
):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1", "localhost"]
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"

    answer = platform.patch(path, {"url": url}).json()

    assert answer["has_credentials"] is False
    assert stored_credentials(endpoint["id"]) is None


def test_new_credentials_on_the_same_broker_replace_the_old(platform, merchant):
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"

    platform.patch(path, {"url": "amqp://ops:fresh@127.0.0.1:5672/orders"})

    assert stored_credentials(endpoint["id"]) == "ops:fresh"


def test_changing_the_kind_takes_the_new_kinds_url_and_target(platform, merchant):
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"

    assert_problem(platform.patch(path, {"kind": "redis"}), 422, ["body", "url"])
    answer = platform.patch(
        path,
        {
            "kind": "redis",
            "url": "redis://127.0.0.1:6379/0",
            "target": TARGETS["redis"],
        },
    ).json()

    assert (answer["kind"], answer["target"]) == ("redis", TARGETS["redis"])
    assert answer["has_credentials"] is False  # another broker: dropped
    back = platform.patch(path, {"kind": "http", "url": "http://127.0.0.1:9/h"})
    assert (back.json()["kind"], back.json()["target"]) == ("http", {})


def test_a_broker_endpoint_is_never_put_under_verification(
    platform, merchant, settings
):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"

    assert endpoint["verification"]["state"] == "not_required"
    assert not Endpoint.objects.get(pk=endpoint["id"]).awaiting_verification
    for action in ("verification", "verify"):
        body = {"challenge": "vrfy_x"} if action == "verify" else None
        problem = assert_problem(platform.post(f"{path}/{action}", body), 409)
        assert "never verified" in problem["detail"]


def test_an_endpoint_awaiting_verification_stops_waiting_once_a_broker(
    platform, merchant, settings
):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    http = platform.post(ENDPOINTS, {"url": "http://127.0.0.1:9/hook"}).json()
    assert http["verification"]["state"] == "awaiting"
    path = f"{ENDPOINTS}/{http['id']}"

    broker = platform.patch(
        path, {"kind": "nats", "url": URLS["nats"], "target": TARGETS["nats"]}
    ).json()
    assert broker["verification"]["state"] == "not_required"
    # Back to HTTP, the URL proves itself again.
    again = platform.patch(path, {"kind": "http", "url": "http://127.0.0.1:9/new"})
    assert again.json()["verification"]["state"] == "awaiting"
