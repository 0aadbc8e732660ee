"""Breaker and enable/disable actions from the endpoint and endpoint-health lists."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from endpoints.models import Endpoint, EndpointHealth
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from tests.support import factories
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

LISTS = [
    "admin:endpoints_endpoint_changelist",
    "admin:endpoints_endpointhealth_changelist",
]


def act(client, changelist, action, endpoint):
    return client.post(
        reverse(changelist), {"action": action, "_selected_action": [endpoint.pk]}
    )


@pytest.mark.parametrize("changelist", LISTS)
def test_open_then_reset_the_breaker(admin_client, changelist):
    endpoint = factories.endpoint()

    act(admin_client, changelist, "open_breaker", endpoint)
    health = EndpointHealth.objects.get(pk=endpoint.pk)
    assert health.breaker_state == "open" and "paused by staff" in health.breaker_reason

    act(admin_client, changelist, "reset_breaker", endpoint)
    health.refresh_from_db()
    assert (health.breaker_state, health.consecutive_failures, health.opened_at) == (
        "closed",
        0,
        None,
    )
    messages = list(
        LogEntry.objects.order_by("pk").values_list("object_id", "change_message")
    )
    assert messages == [
        (endpoint.pk, "Paused by staff"),
        (endpoint.pk, "Sending resumed (pause ended)"),
    ]


@pytest.mark.parametrize("changelist", LISTS)
def test_disable_then_enable(admin_client, changelist):
    endpoint = factories.endpoint()
    endpoint_breaker_open(endpoint_id=endpoint.pk, reason="test")

    act(admin_client, changelist, "disable_endpoint", endpoint)
    endpoint.refresh_from_db()
    assert not endpoint.is_active and "disabled by staff" in endpoint.disabled_reason

    act(admin_client, changelist, "enable_endpoint", endpoint)
    endpoint.refresh_from_db()
    assert (
        endpoint.is_active
        and EndpointHealth.objects.get(pk=endpoint.pk).breaker_state == "closed"
    )
    assert LogEntry.objects.filter(object_id=endpoint.pk).count() == 2


def test_staff_without_change_permission_on_endpoints_cannot_act(client):
    client.force_login(staff("looker", "endpoints.view_endpoint"))
    endpoint = factories.endpoint()
    endpoint_disable(endpoint=endpoint, reason="gone")

    act(client, LISTS[0], "enable_endpoint", endpoint)

    assert not Endpoint.objects.get(pk=endpoint.pk).is_active
    assert not LogEntry.objects.exists()


def test_health_list_sorts_slowest_first(admin_client):
    fast, slow, unknown = (
        factories.endpoint(url=f"http://127.0.0.1:9/{n}") for n in "fsu"
    )
    EndpointHealth.objects.filter(pk=fast.pk).update(p95_ms=20)
    EndpointHealth.objects.filter(pk=slow.pk).update(p95_ms=4000, is_slow=True)

    response = admin_client.get(reverse(LISTS[1]))

    assert [h.pk for h in response.context["cl"].result_list] == [
        slow.pk,
        fast.pk,
        unknown.pk,
    ]


@pytest.mark.parametrize("changelist", LISTS)
def test_exempt_from_auto_disable_and_back(admin_client, changelist):
    endpoint = factories.endpoint()

    act(admin_client, changelist, "exempt_from_auto_disable", endpoint)
    assert Endpoint.objects.get(pk=endpoint.pk).auto_disable_exempt
    act(admin_client, changelist, "allow_auto_disable", endpoint)
    assert not Endpoint.objects.get(pk=endpoint.pk).auto_disable_exempt
    assert list(LogEntry.objects.order_by("pk").values_list("change_message")) == [
        ("Exempted from auto-disable",),
        ("Auto-disable allowed",),
    ]


def test_staff_disable_records_who(admin_client):
    endpoint = factories.endpoint()
    act(admin_client, LISTS[0], "disable_endpoint", endpoint)
    assert Endpoint.objects.get(pk=endpoint.pk).disabled_by == "staff:admin"
