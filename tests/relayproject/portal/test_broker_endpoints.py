"""Broker endpoints in the portal: the kind picker offers only the kinds the
operator allows, each kind's form shows and reads only its own fields, errors
sit next to their fields, and no page ever shows a broker password."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from endpoints.models import Endpoint
from tests.support import factories

BROKER_PASSWORD = "pw-7c1e9a44d0"
HOSTS = ["127.0.0.1:5672", "127.0.0.1:4222", "127.0.0.1:6379", "127.0.0.1:1883"]
COMMON = {
    "description": "",
    "event_types": "",
    "max_attempts": "",
    "rate_limit_per_second": "",
    "max_in_flight": "",
}
RABBIT = {
    **COMMON,
    "kind": "rabbitmq",
    "broker_url": "amqp://127.0.0.1:5672/",
    "broker_user": "guest",
    "broker_password": BROKER_PASSWORD,
    "exchange": "",
    "routing_key": "orders",
}


@pytest.fixture(autouse=True)
def _brokers_on(settings):
    settings.RELAY_BROKER_HOSTS = HOSTS
    settings.RELAY_BROKER_KINDS = ["rabbitmq", "nats", "redis", "mqtt"]


def create_url(world, **query) -> str:
    url = reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def kinds_offered(html: str) -> list[str]:
    return re.findall(r'<input type="radio" name="kind" value="([a-z]+)"', html)


def field_block(html: str, name: str) -> str:
    match = re.search(
        rf'<div class="field[^"]*" data-field="{name}">(.*?)</div>', html, re.S
    )
    assert match, f"no field {name}"
    return match.group(1)


def group_hidden(html: str, kinds: str) -> bool:
    match = re.search(
        rf'<div class="kind-fields" data-kinds="{kinds}"( hidden)?>', html
    )
    assert match, f"no group for {kinds}"
    return bool(match.group(1))


def rabbit_endpoint(world, **kwargs) -> Endpoint:
    return factories.endpoint(
        world.mine.merchant,
        kind="rabbitmq",
        url=f"amqp://guest:{BROKER_PASSWORD}@127.0.0.1:5672/",
        target={"exchange": "", "routing_key": "orders"},
        **kwargs,
    )


def test_every_offered_kind_is_picked_with_http_the_default(client, world):
    client.force_login(world.owner)
    html = client.get(create_url(world)).content.decode()
    assert kinds_offered(html) == ["http", "rabbitmq", "nats", "redis", "mqtt", "pull"]
    assert re.search(r'value="http"[^>]*checked', html)
    assert not group_hidden(html, "http")
    assert group_hidden(html, "rabbitmq nats redis mqtt")


@pytest.mark.parametrize(
    ("hosts", "merchant_hosts", "kinds", "offered"),
    [
        # Pull calls nothing the operator lists: it is always offered.
        ([], None, ["rabbitmq", "nats"], []),  # no host may be used: no broker
        (HOSTS, [], ["rabbitmq", "nats"], []),  # staff gave this merchant none
        ([], ["127.0.0.1:4222"], ["rabbitmq", "nats"], ["rabbitmq", "nats"]),
        (HOSTS, None, ["nats"], ["nats"]),
        (HOSTS, None, [], []),  # the feature turned off
    ],
)
def test_the_picker_offers_only_the_kinds_that_could_be_saved(
    client, world, settings, hosts, merchant_hosts, kinds, offered
):
    settings.RELAY_BROKER_HOSTS = hosts
    settings.RELAY_BROKER_KINDS = kinds
    world.mine.merchant.broker_hosts = merchant_hosts
    world.mine.merchant.save()
    client.force_login(world.owner)
    html = client.get(create_url(world, kind="rabbitmq")).content.decode()
    assert kinds_offered(html) == ["http", *offered, "pull"]
    if not offered:
        # No broker kind: no broker field, the HTTP URL shown.
        assert 'name="broker_url"' not in html
        assert not group_hidden(html, "http")


def test_a_kind_that_is_off_is_refused_beside_the_picker(client, world, settings):
    settings.RELAY_BROKER_KINDS = ["nats"]
    client.force_login(world.owner)
    before = Endpoint.objects.count()
    response = client.post(create_url(world), RABBIT)
    assert response.status_code == 400
    html = response.content.decode()
    assert (
        "This kind of destination is not offered." in html.split('id="kind-errors"')[1]
    )
    assert Endpoint.objects.count() == before


def test_a_kind_asked_for_in_the_link_shows_only_its_fields(client, world):
    client.force_login(world.owner)
    html = client.get(create_url(world, kind="redis")).content.decode()
    assert re.search(r'value="redis"[^>]*checked', html)
    assert group_hidden(html, "http")
    assert not group_hidden(html, "rabbitmq nats redis mqtt")
    assert not group_hidden(html, "redis")
    for other in ("rabbitmq", "nats", "mqtt"):
        assert group_hidden(html, other)
    # The HTTP URL and "Stop retrying on" (statuses) alike.
    assert re.findall(r'data-kinds="http"( hidden)?', html) == [" hidden", " hidden"]


def test_the_pickers_own_button_shows_the_kind_keeping_what_was_typed(client, world):
    """Without script: the picker's submit re-renders, saving nothing."""
    client.force_login(world.owner)
    before = Endpoint.objects.count()
    response = client.post(
        create_url(world),
        {**COMMON, "kind": "nats", "description": "Orders bus", "pick_kind": "1"},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert not group_hidden(html, "nats")
    assert group_hidden(html, "http")
    assert 'value="Orders bus"' in html
    assert "errorlist" not in html
    assert Endpoint.objects.count() == before


def test_a_rabbitmq_endpoint_is_created_with_its_credentials_apart(client, world):
    client.force_login(world.owner)
    response = client.post(create_url(world), RABBIT)
    assert response.status_code == 302, response.content.decode()
    endpoint = Endpoint.objects.get(kind="rabbitmq")
    assert endpoint.url == "amqp://127.0.0.1:5672/"
    assert endpoint.target == {"exchange": "", "routing_key": "orders"}
    assert endpoint.broker_credentials == f"guest:{BROKER_PASSWORD}"
    assert not endpoint.awaiting_verification
    detail = client.get(response["Location"]).content.decode()
    assert "RabbitMQ exchange" in detail
    assert "the default exchange, routing key &#x27;orders&#x27;" in detail
    assert "user &#x27;guest&#x27; and a password, which is never shown" in detail
    assert BROKER_PASSWORD not in detail


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"routing_key": ""}, "routing_key", "name a routing key"),
        ({"broker_url": ""}, "broker_url", "Enter the broker&#x27;s URL."),
        (
            {"broker_url": "https://127.0.0.1:5672/"},
            "broker_url",
            "starts with amqp://",
        ),
        (
            {"broker_url": "amqp://10.9.8.7:5672/"},
            "broker_url",
            "not one the operator allows",
        ),
        (
            {"broker_url": f"amqp://guest:{BROKER_PASSWORD}@127.0.0.1:5672/"},
            "broker_url",
            "in their own fields below",
        ),
        (
            {"kind": "nats", "subject": "orders.*"},
            "subject",
            "without spaces or the wildcards",
        ),
        (
            {"kind": "nats", "broker_url": "nats://127.0.0.1:4222", "subject": ""},
            "subject",
            "required",
        ),
        (
            {
                "kind": "redis",
                "broker_url": "redis://127.0.0.1:6379/0",
                "stream": "s",
                "maxlen": "0",
            },
            "maxlen",
            "greater than or equal to 1",
        ),
        (
            {"kind": "mqtt", "broker_url": "mqtt://127.0.0.1:1883", "topic": "shop/#"},
            "topic",
            "no wildcards",
        ),
    ],
)
def test_each_error_is_shown_next_to_its_field_without_the_password(
    client, world, changes, field, message
):
    client.force_login(world.owner)
    before = Endpoint.objects.count()
    response = client.post(create_url(world), {**RABBIT, **changes})
    assert response.status_code == 400
    html = response.content.decode()
    assert message in field_block(html, field)
    assert BROKER_PASSWORD not in html
    assert Endpoint.objects.count() == before


def test_the_edit_form_keeps_the_password_it_never_shows(client, world):
    endpoint = rabbit_endpoint(world)
    client.force_login(world.owner)
    url = reverse("portal:endpoint_edit", args=[world.mine.merchant.slug, endpoint.pk])
    html = client.get(url).content.decode()
    assert BROKER_PASSWORD not in html
    assert "A password is set; leave empty to keep it." in html
    assert 'value="guest"' in html
    assert 'value="amqp://127.0.0.1:5672/"' in html
    assert 'id="kind-picker"' not in html
    response = client.post(
        url, {**RABBIT, "broker_password": "", "routing_key": "payments"}
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.target["routing_key"] == "payments"
    assert endpoint.broker_credentials == f"guest:{BROKER_PASSWORD}"


def test_a_new_user_on_the_edit_form_needs_the_password_typed(client, world):
    endpoint = rabbit_endpoint(world)
    client.force_login(world.owner)
    url = reverse("portal:endpoint_edit", args=[world.mine.merchant.slug, endpoint.pk])
    response = client.post(url, {**RABBIT, "broker_user": "ops", "broker_password": ""})
    assert response.status_code == 400
    assert "Type the password again" in field_block(
        response.content.decode(), "broker_password"
    )
    response = client.post(
        url, {**RABBIT, "broker_user": "ops", "broker_password": "new-pw"}
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.broker_credentials == "ops:new-pw"


def test_a_failed_edit_never_sends_the_typed_password_back(client, world):
    endpoint = rabbit_endpoint(world)
    client.force_login(world.owner)
    url = reverse("portal:endpoint_edit", args=[world.mine.merchant.slug, endpoint.pk])
    response = client.post(
        url, {**RABBIT, "broker_password": "typed-pw-31", "routing_key": ""}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "typed-pw-31" not in html
    assert BROKER_PASSWORD not in html
    assert "Not saved: type the password again." in field_block(html, "broker_password")
