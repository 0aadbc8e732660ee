"""Bounded JSON: data deeper than MAX_EVENT_DEPTH is a 422, the deepest accepted renders."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from deliveries.models import Delivery
from endpoints.models import Membership
from tests.support import factories
from tests.support.api import api_as, assert_problem


def nested(depth: int) -> dict:
    """{"l": {"l": ... {"leaf": "bottom"}}}: depth containers, the innermost a dict."""
    value: dict = {"leaf": "bottom"}
    for _ in range(depth - 1):
        value = {"l": value}
    return value


@pytest.fixture
def acme(db):
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    return merchant


def event(data) -> dict:
    return {"merchant": "acme", "type": "order.created", "data": data}


def test_depth_33_is_refused_naming_the_field(acme):
    response = api_as(None).post("/events", event(nested(33)))
    assert_problem(response, 422, ["body", "data"])
    assert Delivery.objects.count() == 0


def test_depth_33_in_a_batch_names_the_item(acme):
    events = [event({"n": 1}), event({"n": 2}), event(nested(33))]
    response = api_as(None).post("/events/batch", {"events": events})
    assert_problem(response, 422, ["body", "events", 2, "data"])
    assert Delivery.objects.count() == 0


@pytest.mark.parametrize("depth", [40, 900])
def test_much_deeper_data_is_a_422_not_a_crash(acme, depth):
    response = api_as(None).post("/events", event(nested(depth)))
    assert_problem(response, 422)


def test_deeper_than_the_json_parser_can_go_is_a_422(acme):
    # 100,000 levels in 200 KB: Python's json itself gives up (RecursionError).
    depth = 100_000
    raw = '{"merchant": "acme", "type": "a.b", "data": {"x": ' + "[" * depth
    raw += "]" * depth + "}}"
    response = api_as(None).post("/events", raw=raw)
    assert_problem(response, 422, ["body"])


def test_the_deepest_accepted_event_renders_in_admin_and_portal(acme, client):
    created = api_as(None).post("/events", event(nested(32)))
    assert created.status_code == 201, created.content
    delivery = Delivery.objects.get()
    admin = User.objects.create_superuser("root", password="pw-for-tests-only")
    owner = User.objects.create_user("owner", password="pw-for-tests-only")
    Membership.objects.create(user=owner, merchant=acme, role="owner")

    client.force_login(admin)
    pages = [
        reverse("admin:deliveries_delivery_change", args=[delivery.pk]),
        reverse("admin:deliveries_event_change", args=[delivery.event_id]),
        reverse("admin:deliveries_delivery_changelist"),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
    assert "bottom" in client.get(pages[1]).content.decode()

    client.force_login(owner)
    portal = client.get(reverse("portal:delivery_detail", args=["acme", delivery.pk]))
    assert portal.status_code == 200
    body = json.loads(_sent_body(portal.content.decode()))
    assert body["data"] == nested(32)


def _sent_body(html: str) -> str:
    import html as html_lib
    import re

    match = re.search(r'<pre class="body" id="request-body">(.*?)</pre>', html, re.S)
    assert match
    return html_lib.unescape(match.group(1))
