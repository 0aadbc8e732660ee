"""Staff send an endpoint in order, or not: two actions, logged; the page shows it."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from endpoints.models import Endpoint
from tests.support import factories
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:endpoints_endpoint_changelist"


def act(client, action, endpoint):
    return client.post(
        reverse(CHANGELIST), {"action": action, "_selected_action": [endpoint.pk]}
    )


def test_staff_make_an_endpoint_ordered_then_unordered(client):
    endpoint = factories.endpoint()
    client.force_login(
        staff("editor", "endpoints.view_endpoint", "endpoints.change_endpoint")
    )
    act(client, "make_ordered", endpoint)
    assert Endpoint.objects.get(pk=endpoint.pk).ordered
    page = client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()
    assert "Ordered" in page
    act(client, "make_unordered", endpoint)
    assert not Endpoint.objects.get(pk=endpoint.pk).ordered
    assert [e.change_message for e in LogEntry.objects.order_by("pk")] == [
        "Ordered",
        "Unordered",
    ]


def test_a_viewer_cannot_change_the_order(client):
    endpoint = factories.endpoint()
    client.force_login(staff("viewer", "endpoints.view_endpoint"))
    act(client, "make_ordered", endpoint)
    assert not Endpoint.objects.get(pk=endpoint.pk).ordered
