"""A broker URL as answers show it, the password as *** (CONTRACT section 8),
and given back: *** stands for the stored password on the endpoint's own
broker only, and is refused anywhere else."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from tests.support.api import assert_problem

pytestmark = pytest.mark.postgres

PASSWORD = "Plum-Quokka-7731-zebra"
TOKEN = "Nats-Token-5521-otter"
ENDPOINTS = "/merchants/acme/endpoints"
RABBITMQ = {
    "kind": "rabbitmq",
    "url": f"amqp://relay:{PASSWORD}@127.0.0.1:5672/orders",
    "target": {"exchange": "", "routing_key": "orders"},
}
NATS = {"kind": "nats", "target": {"subject": "orders.paid"}}
REDIS = {"kind": "redis", "target": {"stream": "orders"}}


@pytest.fixture(autouse=True)
def _loopback_brokers(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1", "localhost"]
    settings.RELAY_BROKER_KINDS = ["rabbitmq", "nats", "redis", "mqtt"]


def created(api, **fields) -> dict:
    response = api.post(ENDPOINTS, {**RABBITMQ, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def stored(endpoint_id: str) -> tuple[str, str | None]:
    """(url, credentials) as the row holds them, the credentials decrypted."""
    row = Endpoint.objects.get(pk=endpoint_id)
    return row.url, row.broker_credentials


@pytest.mark.parametrize(
    ("fields", "shown", "credentials"),
    [
        ({}, "amqp://relay:***@127.0.0.1:5672/orders", f"relay:{PASSWORD}"),
        (
            {**NATS, "url": f"nats://{TOKEN}@127.0.0.1:4222"},
            "nats://***@127.0.0.1:4222",  # a token alone: masked whole
            TOKEN,
        ),
        (
            {**REDIS, "url": f"redis://:{PASSWORD}@127.0.0.1:6379/0"},
            "redis://***@127.0.0.1:6379/0",
            f":{PASSWORD}",
        ),
    ],
    ids=["user-and-password", "nats-token", "redis-password"],
)
def test_the_url_an_answer_shows_given_back_keeps_the_stored_credentials(
    any_key, fields, shown, credentials
):
    endpoint = created(any_key, **fields)
    path = f"{ENDPOINTS}/{endpoint['id']}"
    url = any_key.get(path).json()["url"]
    listed = any_key.get(ENDPOINTS).content.decode()

    answer = any_key.patch(path, {"url": url})

    assert url == shown == endpoint["url"]
    assert answer.status_code == 200, answer.content
    assert (answer.json()["url"], answer.json()["has_credentials"]) == (shown, True)
    assert stored(endpoint["id"])[1] == credentials
    for text in (str(endpoint), listed, answer.content.decode()):
        assert PASSWORD not in text and TOKEN not in text


def test_a_new_user_with_the_masked_password_keeps_the_password(platform, merchant):
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"

    # Another vhost too: the same broker is its scheme, host and port.
    answer = platform.patch(path, {"url": "amqp://app2:***@127.0.0.1:5672/billing"})

    assert answer.json()["url"] == "amqp://app2:***@127.0.0.1:5672/billing"
    assert stored(endpoint["id"]) == (
        "amqp://127.0.0.1:5672/billing",
        f"app2:{PASSWORD}",
    )


@pytest.mark.parametrize(
    "change",
    [
        {"url": "amqp://relay:***@localhost:5672/orders"},  # another host
        {"url": "amqp://relay:***@127.0.0.1:5673/orders"},  # another port
        {"url": "amqps://relay:***@127.0.0.1:5672/orders"},  # another scheme
        {"url": "amqp://***@localhost:5672/orders"},  # masked whole
        {**NATS, "url": "nats://relay:***@127.0.0.1:4222"},  # another kind
    ],
    ids=["host", "port", "scheme", "whole-userinfo", "kind"],
)
def test_a_masked_password_for_another_broker_is_422_and_changes_nothing(
    platform, merchant, change
):
    endpoint = created(platform)
    path = f"{ENDPOINTS}/{endpoint['id']}"
    before = stored(endpoint["id"]), platform.get(path).json()

    body = assert_problem(platform.patch(path, change), 422, ["body", "url"])

    assert "stands for a stored password" in body["errors"][0]["msg"]
    assert (stored(endpoint["id"]), platform.get(path).json()) == before


@pytest.mark.parametrize(
    "url",
    [
        "amqp://relay:***@127.0.0.1:5672/orders",
        "amqp://***@127.0.0.1:5672/orders",
        "amqp://relay:%2A%2A%2A@127.0.0.1:5672/orders",  # *** percent-encoded
    ],
)
def test_a_masked_password_on_a_new_endpoint_is_422(platform, merchant, url):
    body = assert_problem(platform.post(ENDPOINTS, {**RABBITMQ, "url": url}), 422)

    assert body["errors"][0]["loc"] == ["body", "url"]
    assert "give the password itself" in body["errors"][0]["msg"]
    assert Endpoint.objects.count() == 0


def test_a_masked_password_with_nothing_stored_is_422(platform, merchant):
    endpoint = created(platform, url="amqp://127.0.0.1:5672/orders")
    path = f"{ENDPOINTS}/{endpoint['id']}"

    patched = platform.patch(path, {"url": "amqp://relay:***@127.0.0.1:5672/orders"})

    assert_problem(patched, 422, ["body", "url"])
    assert stored(endpoint["id"]) == ("amqp://127.0.0.1:5672/orders", None)


def test_an_http_endpoints_url_is_shown_as_given(platform, merchant):
    url = "http://127.0.0.1:9/hooks/***/orders"
    endpoint = platform.post(ENDPOINTS, {"url": url}).json()
    path = f"{ENDPOINTS}/{endpoint['id']}"

    assert endpoint["url"] == platform.get(path).json()["url"] == url
    assert platform.patch(path, {"url": url}).json()["url"] == url
