"""Retry policy on the portal's endpoint form: max attempts, schedule and
timeout are saved by owners and developers, values past the operator's
bounds are refused next to their field naming the bound, and the endpoint
page shows the policy in force and where each part comes from."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.merchant_services import merchant_update
from endpoints.models import Endpoint, Membership
from tests.relayproject.portal.test_forms import field_block
from tests.support.portal import user_with_role


@pytest.fixture(autouse=True)
def bounds(settings):
    settings.RETRY_MAX_ATTEMPTS_LIMIT = 20
    settings.RETRY_MAX_WINDOW_SECONDS = 3600
    settings.HTTP_TIMEOUT_MAX_SECONDS = 30
    settings.HTTP_TIMEOUT_SECONDS = 10
    settings.MAX_ATTEMPTS = 8


def edit_url(endpoint) -> str:
    return reverse("portal:endpoint_edit", args=[endpoint.merchant.slug, endpoint.pk])


def detail_of(client, endpoint) -> str:
    url = reverse("portal:endpoint_detail", args=[endpoint.merchant.slug, endpoint.pk])
    return client.get(url).content.decode()


def posted(endpoint, **retry) -> dict:
    return {"url": endpoint.url, "description": "", "event_types": "", **retry}


def policy_of(endpoint) -> tuple:
    endpoint.refresh_from_db()
    return endpoint.retry_schedule, endpoint.max_attempts, endpoint.timeout_seconds


@pytest.mark.parametrize("role", [Membership.Role.OWNER, Membership.Role.DEVELOPER])
def test_an_editor_sets_the_retry_policy(client, world, role):
    client.force_login(user_with_role(world.mine.merchant, role, "editor"))
    endpoint = world.mine.endpoint

    response = client.post(
        edit_url(endpoint),
        posted(
            endpoint,
            max_attempts="3",
            retry_schedule="5, 30 300",
            timeout_seconds="2.5",
        ),
    )

    assert response.status_code == 302, response.content.decode()[:3000]
    assert policy_of(endpoint) == ([5, 30, 300], 3, 2.5)


def test_the_form_shows_the_schedule_as_typed_back(client, world):
    Endpoint.objects.filter(pk=world.mine.endpoint.pk).update(
        retry_schedule=[5, 30.5], timeout_seconds=4
    )
    client.force_login(world.owner)

    html = client.get(edit_url(world.mine.endpoint)).content.decode()

    assert 'value="5, 30.5"' in field_block(html, "retry_schedule")
    assert 'id="advanced" open' in html  # a value set is never folded away


def test_emptied_fields_go_back_to_the_defaults(client, world):
    endpoint = world.mine.endpoint
    Endpoint.objects.filter(pk=endpoint.pk).update(
        retry_schedule=[5], max_attempts=3, timeout_seconds=4
    )
    client.force_login(world.owner)

    response = client.post(
        edit_url(endpoint),
        posted(endpoint, max_attempts="", retry_schedule=" ", timeout_seconds=""),
    )

    assert response.status_code == 302
    assert policy_of(endpoint) == (None, None, None)


def test_a_post_without_the_retry_fields_keeps_them(client, world):
    endpoint = world.mine.endpoint
    Endpoint.objects.filter(pk=endpoint.pk).update(
        retry_schedule=[5], max_attempts=3, timeout_seconds=4
    )
    client.force_login(world.owner)

    client.post(edit_url(endpoint), posted(endpoint))

    assert policy_of(endpoint) == ([5], 3, 4)


BOUNDS = [
    (
        {"max_attempts": "21"},
        "max_attempts",
        "Must be between 1 and 20 (the RETRY_MAX_ATTEMPTS_LIMIT bound).",
    ),
    (
        {"timeout_seconds": "31"},
        "timeout_seconds",
        "Must be from 1 to 30 seconds (the HTTP_TIMEOUT_MAX_SECONDS bound).",
    ),
    (
        {"retry_schedule": "600, 1200", "max_attempts": "5"},
        "retry_schedule",
        "These retries would span 4200 s, longer than the "
        "RETRY_MAX_WINDOW_SECONDS bound (3600 s)",
    ),
    (
        {"retry_schedule": "5, soon"},
        "retry_schedule",
        "Not a delay in seconds above 0: &#x27;soon&#x27;.",
    ),
    (
        {"retry_schedule": "5, inf"},
        "retry_schedule",
        "Not a delay in seconds above 0: &#x27;inf&#x27;.",
    ),
    ({"retry_schedule": "0"}, "retry_schedule", "Not a delay in seconds above 0"),
    ({"timeout_seconds": "nan"}, "timeout_seconds", "Enter a number."),
]


@pytest.mark.parametrize(("given", "field", "message"), BOUNDS)
def test_a_value_past_a_bound_is_refused_next_to_its_field(
    client, world, given, field, message
):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint
    before = policy_of(endpoint)

    response = client.post(edit_url(endpoint), posted(endpoint, **given))

    html = response.content.decode()
    assert response.status_code == 400
    assert message in field_block(html, field), html[:4000]
    assert policy_of(endpoint) == before


def test_a_new_endpoint_takes_a_schedule(client, world):
    client.force_login(world.owner)

    response = client.post(
        reverse("portal:endpoint_create", args=["acme"]),
        {"url": "http://127.0.0.1:9/new", "retry_schedule": "1, 2", "max_attempts": 3},
    )

    assert response.status_code == 302, response.content.decode()[:3000]
    made = Endpoint.objects.get(url="http://127.0.0.1:9/new")
    assert (made.retry_schedule, made.max_attempts) == ([1, 2], 3)


def test_the_page_shows_the_policy_in_force_and_its_sources(client, world):
    merchant_update(merchant=world.mine.merchant, max_attempts=4)
    Endpoint.objects.filter(pk=world.mine.endpoint.pk).update(retry_schedule=[1, 2])
    client.force_login(world.viewer)

    html = detail_of(client, world.mine.endpoint)

    assert '<span id="max-attempts">4</span> <small>(from your account default)' in (
        html
    )
    assert "1 s, 2 s, then 2 s each time <small>(from this endpoint;" in html
    assert "10 s <small>(from the relay&#x27;s default)" in html


def test_the_help_names_the_defaults_in_force(client, world):
    merchant_update(merchant=world.mine.merchant, retry_schedule=[60, 300])
    client.force_login(world.owner)

    html = client.get(edit_url(world.mine.endpoint)).content.decode()

    schedule = field_block(html, "retry_schedule")
    assert "Empty: your account default (60, 300)" in schedule
    assert "may span at most 3600 s (1 hour)" in schedule
    assert "Empty: the relay&#x27;s default, 8." in field_block(html, "max_attempts")
    assert "From 1 to 30. Empty: the relay&#x27;s default, 10." in field_block(
        html, "timeout_seconds"
    )
