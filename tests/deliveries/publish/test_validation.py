"""Every way an event gets in runs the one validator (deliveries.publish.validation):
depth, size, NUL and lone surrogates, the type, its schema. A payload 1,000
levels deep is a clear error on each path, and nothing is stored."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from deliveries.models import Delivery, Event
from deliveries.publish.validation import EventsRefused
from deliveries.services import EventInput, event_publish, events_publish
from endpoints.models import EventType, Membership
from tests.support import factories
from tests.support.api import api_as, assert_problem

DEEP = 1000


def nested(depth: int) -> dict:
    value: dict = {"leaf": "bottom"}
    for _ in range(depth - 1):
        value = {"l": value}
    return value


def nested_text(depth: int) -> str:
    # Written out, not json.dumps'd: the encoder itself recurses.
    return '{"l": ' * (depth - 1) + '{"leaf": "bottom"}' + "}" * (depth - 1)


@pytest.fixture
def acme(db):
    merchant = factories.merchant("acme")
    merchant.endpoint = factories.endpoint(merchant)
    return merchant


def _nothing_stored() -> None:
    assert not Event.objects.exists()
    assert not Delivery.objects.exists()


def test_the_api_refuses_a_deep_event(acme):
    raw = '{"merchant": "acme", "type": "a.b", "data": ' + nested_text(DEEP) + "}"
    assert_problem(api_as(None).post("/events", raw=raw), 422, ["body"])
    _nothing_stored()


def test_the_api_refuses_a_deep_event_in_a_batch(acme):
    raw = (
        '{"events": [{"merchant": "acme", "type": "a.b", "data": {}}, '
        '{"merchant": "acme", "type": "a.b", "data": ' + nested_text(DEEP) + "}]}"
    )
    assert_problem(api_as(None).post("/events/batch", raw=raw), 422, ["body"])
    _nothing_stored()


@pytest.mark.parametrize("depth", [33, DEEP])
def test_in_process_publishing_refuses_deep_data(acme, depth):
    with pytest.raises(EventsRefused) as refused:
        event_publish(merchant=acme, type="a.b", data=nested(depth))
    ((index, loc, message),) = refused.value.errors
    assert (index, loc) == (0, ["data"])
    assert "MAX_EVENT_DEPTH (32)" in message
    _nothing_stored()


def test_an_in_process_batch_names_the_deep_event(acme):
    with pytest.raises(EventsRefused) as refused:
        events_publish(
            merchant=acme,
            events=[EventInput("a.b", {"n": 1}), EventInput("a.b", nested(DEEP))],
        )
    assert [(i, loc) for i, loc, _ in refused.value.errors] == [(1, ["data"])]
    _nothing_stored()


@pytest.mark.parametrize(
    ("data", "loc", "words"),
    [
        ({"a": "nul\x00"}, ["data", "a"], "U+0000"),
        ({"a": ["ok", "\ud800"]}, ["data", "a", 1], "lone surrogate"),
        ({"k\x00": 1}, ["data", "k\x00"], "U+0000"),
        ({"a": float("nan")}, ["data"], "NaN"),
        (["not", "an", "object"], ["data"], "JSON object"),
    ],
)
def test_in_process_publishing_refuses_what_cannot_be_stored(acme, data, loc, words):
    with pytest.raises(EventsRefused) as refused:
        event_publish(merchant=acme, type="a.b", data=data)
    ((_, where, message),) = refused.value.errors
    assert where == loc
    assert words in message
    _nothing_stored()


@pytest.mark.parametrize("type", ["no spaces", "order.paid\n"])
def test_in_process_publishing_refuses_a_bad_type(acme, type):
    with pytest.raises(EventsRefused) as refused:
        event_publish(merchant=acme, type=type, data={})
    assert [loc for _, loc, _ in refused.value.errors] == [["type"]]
    _nothing_stored()


@pytest.fixture
def owner(acme, client):
    user = User.objects.create_user("owner", password="pw-for-tests-only")
    Membership.objects.create(user=user, merchant=acme, role="owner")
    client.force_login(user)
    EventType.objects.create(name="order.created", example={"n": 1})
    return user


def _example_url(acme) -> str:
    return reverse("portal:endpoint_example", args=["acme", acme.endpoint.pk])


def _error_beside(html: str, field: str) -> str:
    block = html.split(f'data-field="{field}"', 1)[1].split('<div class="field', 1)[0]
    assert 'class="errorlist"' in block, f"no error beside {field}"
    return block


@pytest.mark.parametrize("depth", [33, 850, DEEP])
def test_the_portal_example_form_refuses_deep_data_beside_the_field(
    acme, owner, client, depth
):
    response = client.post(
        _example_url(acme), {"event_type": "order.created", "data": nested_text(depth)}
    )
    assert response.status_code == 400
    assert "MAX_EVENT_DEPTH (32)" in _error_beside(response.content.decode(), "data")
    _nothing_stored()


def test_the_portal_example_form_refuses_a_lone_surrogate(acme, owner, client):
    response = client.post(
        _example_url(acme), {"event_type": "order.created", "data": '{"a": "\\ud800"}'}
    )
    assert response.status_code == 400
    assert "lone surrogate" in _error_beside(response.content.decode(), "data")
    _nothing_stored()


def test_the_portal_test_event_goes_through_the_validator(
    acme, owner, client, settings
):
    settings.MAX_EVENT_BYTES = 10  # the test event's data is longer
    url = reverse("portal:endpoint_test", args=["acme", acme.endpoint.pk])
    response = client.post(url, follow=True)
    assert response.status_code == 200
    assert "MAX_EVENT_BYTES" in response.content.decode()
    _nothing_stored()


def test_the_admin_refuses_a_deep_example_beside_the_field(db, client):
    staff = User.objects.create_superuser("root", password="pw-for-tests-only")
    client.force_login(staff)
    response = client.post(
        reverse("admin:endpoints_eventtype_add"),
        {"name": "order.created", "description": "", "example": nested_text(DEEP)},
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "MAX_EVENT_DEPTH (32)" in " ".join(errors["example"])
    assert not EventType.objects.filter(name="order.created").exists()


def test_the_api_refuses_a_catalogue_example_deeper_than_events_may_be(db):
    body = {"name": "order.created", "example": nested(40)}
    response = api_as(None).post("/event-types", body)
    assert_problem(response, 422, ["body", "example"])
    assert not EventType.objects.filter(name="order.created").exists()


def test_an_example_at_the_depth_limit_is_kept_and_sent(acme, owner, client):
    response = client.post(
        _example_url(acme),
        {"event_type": "order.created", "data": json.dumps(nested(32))},
    )
    assert response.status_code == 302
    assert Event.objects.get().data == nested(32)
