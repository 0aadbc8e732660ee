"""Each invalid input shows its error next to its field and changes nothing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from endpoints.models import Endpoint, EndpointSecret
from tests.support.portal import PASSWORD

VALID = {
    "url": "http://127.0.0.1:9/new",
    "description": "",
    "event_types": "",
    "max_attempts": "",
    "rate_limit_per_second": "",
    "max_in_flight": "",
}

INVALID = [
    ("url", "", "This field is required."),
    ("url", "ftp://example.com/hook", "only http and https URLs may be called"),
    ("url", "https://user:pw@example.com/", "credentials in the URL are not allowed"),
    ("event_types", "order.paid, not a type!", "Not an event type or prefix.* pattern"),
    (
        "max_attempts",
        "0",
        "Must be between 1 and 100 (the RETRY_MAX_ATTEMPTS_LIMIT bound).",
    ),
    ("max_attempts", "many", "Enter a whole number."),
    ("rate_limit_per_second", "0", "Must be above 0 and at most 10000."),
    ("max_in_flight", "0", "Must be between 1 and 1000."),
    ("max_in_flight", "lots", "Enter a whole number."),
    ("description", "x" * 501, "at most 500 characters"),
]


def field_block(html: str, name: str) -> str:
    match = re.search(
        rf'<div class="field[^"]*" data-field="{name}">(.*?)</div>', html, re.S
    )
    assert match, f"no field {name}"
    return match.group(1)


def counts() -> tuple[int, int]:
    return Endpoint.objects.count(), EndpointSecret.objects.count()


@pytest.mark.parametrize(("field", "value", "message"), INVALID)
def test_invalid_create_input_is_shown_next_to_its_field(
    client, world, field, value, message
):
    client.force_login(world.owner)
    before = counts()
    response = client.post(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug]),
        {**VALID, field: value},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert message in field_block(html, field)
    others = [f for f in VALID if f != field]
    assert all("errorlist" not in field_block(html, f) for f in others)
    assert counts() == before


def test_a_private_destination_is_refused_with_the_policys_reason(
    client, world, settings
):
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    client.force_login(world.owner)
    before = counts()
    response = client.post(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug]),
        {**VALID, "url": "http://localhost:8080/hook"},
    )
    reason = field_block(response.content.decode(), "url")
    assert "resolves to a private or loopback address" in reason
    # Where the name points is never told: that would map internal DNS.
    assert "127.0.0.1" not in reason
    assert "::1" not in reason
    assert counts() == before


@pytest.mark.parametrize(("field", "value", "message"), INVALID)
def test_invalid_edit_input_is_shown_next_to_its_field_and_saves_nothing(
    client, world, field, value, message
):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint
    before = list(Endpoint.objects.values().order_by("pk"))
    response = client.post(
        reverse("portal:endpoint_edit", args=[world.mine.merchant.slug, endpoint.pk]),
        {**VALID, "description": "changed", field: value},
    )
    assert response.status_code == 400
    assert message in field_block(response.content.decode(), field)
    assert list(Endpoint.objects.values().order_by("pk")) == before


def test_a_valid_create_stores_picked_and_typed_event_types(client, world):
    client.force_login(world.owner)
    response = client.post(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug]),
        {
            **VALID,
            "known_event_types": ["order.paid"],
            "event_types": "refund.*, payout.sent",
            "max_attempts": "3",
        },
    )
    endpoint = Endpoint.objects.get(url=VALID["url"])
    assert response.status_code == 302
    assert endpoint.event_types == ["order.paid", "refund.*", "payout.sent"]
    assert endpoint.max_attempts == 3


def test_the_create_form_offers_the_event_types_this_merchant_has_seen(client, world):
    client.force_login(world.owner)
    response = client.get(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    )
    html = response.content.decode()
    start = html.index('data-field="known_event_types"')  # the grouped picker
    assert 'value="order.paid"' in html[start : html.index('id="type-none"', start)]


@pytest.mark.parametrize(
    ("since", "message"),
    [("", "This field is required."), ("yesterday", "Enter a valid date/time.")],
)
def test_invalid_recover_since_is_shown_next_to_it_and_recovers_nothing(
    client, world, since, message
):
    client.force_login(world.owner)
    response = client.post(
        reverse(
            "portal:endpoint_recover",
            args=[world.mine.merchant.slug, world.mine.endpoint.pk],
        ),
        {"since": since, "confirm": "True"},
    )
    assert response.status_code == 400
    assert message in field_block(response.content.decode(), "since")
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "dead"


def sign_in(client, password: str):
    return client.post(
        reverse("portal:login"), {"username": "owner", "password": password}
    )


def test_a_wrong_password_is_refused_with_a_form_error(client, world):
    response = sign_in(client, "wrong")
    assert "Please enter a correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_sign_in_is_refused_after_five_failures_even_with_the_right_password(
    client, world
):
    for _ in range(5):
        sign_in(client, "wrong")
    response = sign_in(client, PASSWORD)
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_four_failures_still_let_the_right_password_in(client, world):
    for _ in range(4):
        sign_in(client, "wrong")
    response = sign_in(client, PASSWORD)
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(world.owner.pk)
