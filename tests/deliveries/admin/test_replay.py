"""Replay from the admin: one button, the bulk action, all dead of an endpoint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.ops import counters
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.support import factories, seed
from tests.support.admin import staff

pytestmark = pytest.mark.django_db


def dead(endpoint, n=1, **kwargs):
    now = utcnow()
    return [
        seed.delivery(
            endpoint,
            status="dead",
            created_at=now - timedelta(minutes=i + 1),
            dead_at=now - timedelta(minutes=i),
            attempts=10,
            last_status_code=500,
            last_error="HTTP 500",
            **kwargs,
        )
        for i in range(n)
    ]


def replayed_total() -> float:
    return counters.counter_totals().get((counters.REPLAYED, ""), 0)


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def endpoint():
    return factories.endpoint()


def test_replay_button_puts_the_delivery_back_to_pending_logs_and_counts(
    admin_client, admin_user, endpoint
):
    [d] = dead(endpoint)

    response = admin_client.post(
        reverse("admin:deliveries_delivery_replay", args=[d.pk]), follow=True
    )

    d.refresh_from_db()
    assert (d.status, d.budget_start, d.dead_at) == ("pending", 10, None)
    entry = LogEntry.objects.get(object_id=d.pk)
    assert entry.user == admin_user and "Replayed" in entry.get_change_message()
    assert replayed_total() == 1
    assert any(f"Replayed {d.pk}" in m for m in messages_of(response))
    assert response.redirect_chain[-1][0] == reverse(
        "admin:deliveries_delivery_change", args=[d.pk]
    )


def test_replay_from_a_list_row_returns_to_that_list(admin_client, endpoint):
    [d] = dead(endpoint)
    back = reverse("admin:deliveries_deadletter_changelist")

    response = admin_client.post(
        reverse("admin:deliveries_delivery_replay", args=[d.pk]) + f"?next={back}"
    )

    assert response.status_code == 302 and response["Location"] == back


def test_replay_refuses_a_redirect_to_another_host(admin_client, endpoint):
    [d] = dead(endpoint)

    response = admin_client.post(
        reverse("admin:deliveries_delivery_replay", args=[d.pk])
        + "?next=https://evil.example/"
    )

    assert response["Location"] == reverse(
        "admin:deliveries_delivery_change", args=[d.pk]
    )


def test_replay_is_never_a_get(admin_client, endpoint):
    [d] = dead(endpoint)

    response = admin_client.get(
        reverse("admin:deliveries_delivery_replay", args=[d.pk])
    )

    assert response.status_code == 405
    d.refresh_from_db()
    assert d.status == "dead"


def test_replay_needs_the_csrf_token(admin_user, endpoint):
    from django.test import Client

    [d] = dead(endpoint)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = client.post(reverse("admin:deliveries_delivery_replay", args=[d.pk]))

    assert response.status_code == 403
    d.refresh_from_db()
    assert d.status == "dead"


def test_replay_towards_a_disabled_endpoint_says_so(admin_client, endpoint):
    [d] = dead(endpoint)
    endpoint_disable(endpoint=endpoint, reason="410 Gone")

    response = admin_client.post(
        reverse("admin:deliveries_delivery_replay", args=[d.pk]), follow=True
    )

    [message] = messages_of(response)
    assert message == (
        f"Replayed {d.pk}: it is pending, but not sent yet. Held: the endpoint is "
        "disabled (410 Gone); it is sent once it is enabled."
    )


def test_replay_of_a_pending_delivery_is_refused_with_a_message(admin_client, endpoint):
    d = seed.delivery(endpoint, status="pending", created_at=utcnow())

    response = admin_client.post(
        reverse("admin:deliveries_delivery_replay", args=[d.pk]), follow=True
    )

    assert any("Not replayed" in m for m in messages_of(response))
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize(
    "changelist",
    ["admin:deliveries_delivery_changelist", "admin:deliveries_deadletter_changelist"],
)
def test_bulk_replay_selected(admin_client, endpoint, changelist):
    rows = dead(endpoint, 3)
    chosen = [rows[0].pk, rows[2].pk]

    response = admin_client.post(
        reverse(changelist),
        {"action": "replay_selected", "_selected_action": chosen},
        follow=True,
    )

    statuses = dict(Delivery.objects.values_list("pk", "status"))
    assert [statuses[r.pk] for r in rows] == ["pending", "dead", "pending"]
    assert set(LogEntry.objects.values_list("object_id", flat=True)) == set(chosen)
    assert replayed_total() == 2
    assert "Replayed 2 deliveries." in messages_of(response)


def test_replay_all_dead_of_an_endpoint_confirms_with_a_count_first(
    admin_client, endpoint
):
    dead(endpoint, 3)
    dead(factories.endpoint(url="http://127.0.0.1:9/other"), 2)
    url = reverse("admin:deliveries_deadletter_replay_endpoint", args=[endpoint.pk])

    page = admin_client.get(url)

    assert page.status_code == 200 and page.context["count"] == 3
    assert 'id="dead-count">3<' in page.content.decode()
    assert Delivery.objects.filter(status="dead").count() == 5  # nothing changed yet


def test_replay_all_dead_of_an_endpoint(admin_client, admin_user, endpoint):
    dead(endpoint, 3)
    others = dead(factories.endpoint(url="http://127.0.0.1:9/other"), 2)

    response = admin_client.post(
        reverse("admin:deliveries_deadletter_replay_endpoint", args=[endpoint.pk]),
        follow=True,
    )

    assert set(
        Delivery.objects.filter(endpoint=endpoint).values_list("status", flat=True)
    ) == {"pending"}
    assert (
        Delivery.objects.filter(pk__in=[o.pk for o in others], status="dead").count()
        == 2
    )
    entry = LogEntry.objects.get()
    assert (entry.object_id, entry.user) == (endpoint.pk, admin_user)
    assert "all 3 dead deliveries" in entry.get_change_message()
    assert replayed_total() == 3
    assert f"Replayed 3 dead deliveries of {endpoint.pk}." in messages_of(response)


@pytest.fixture
def viewer(client):
    client.force_login(staff("viewer", "deliveries.view_delivery"))
    return client


def test_staff_without_change_permission_cannot_replay_one(viewer, endpoint):
    [d] = dead(endpoint)

    response = viewer.post(reverse("admin:deliveries_delivery_replay", args=[d.pk]))

    assert response.status_code == 403
    d.refresh_from_db()
    assert d.status == "dead" and not LogEntry.objects.exists()


def test_staff_without_change_permission_cannot_bulk_replay(viewer, endpoint):
    rows = dead(endpoint, 2)

    viewer.post(
        reverse("admin:deliveries_delivery_changelist"),
        {"action": "replay_selected", "_selected_action": [r.pk for r in rows]},
    )

    assert (
        Delivery.objects.filter(status="dead").count() == 2
        and not LogEntry.objects.exists()
    )


@pytest.mark.parametrize("method", ["get", "post"])
def test_staff_without_change_permission_cannot_replay_all_of_an_endpoint(
    viewer, endpoint, method
):
    dead(endpoint, 2)

    response = getattr(viewer, method)(
        reverse("admin:deliveries_deadletter_replay_endpoint", args=[endpoint.pk])
    )

    assert response.status_code == 403
    assert Delivery.objects.filter(status="dead").count() == 2


def test_staff_without_change_permission_see_no_replay_button(viewer, endpoint):
    [d] = dead(endpoint)

    list_html = viewer.get(
        reverse("admin:deliveries_deadletter_changelist")
    ).content.decode()
    page_html = viewer.get(
        reverse("admin:deliveries_delivery_change", args=[d.pk])
    ).content.decode()

    assert d.pk in list_html and "replay-button" not in list_html
    assert 'id="replay-button"' not in page_html
