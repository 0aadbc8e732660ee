"""Staff marking an endpoint verified: it needs its own permission (change
rights are not enough), is written to the admin log, and shows no challenge."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from endpoints.models import Endpoint
from tests.support import factories
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:endpoints_endpoint_changelist"


@pytest.fixture
def awaiting(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    return factories.endpoint()


def mark(client, endpoint):
    return client.post(
        reverse(CHANGELIST),
        {"action": "mark_verified", "_selected_action": [endpoint.pk]},
    )


def test_change_rights_alone_cannot_mark_verified(client, awaiting):
    client.force_login(
        staff("editor", "endpoints.view_endpoint", "endpoints.change_endpoint")
    )
    mark(client, awaiting)
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification
    assert not LogEntry.objects.exists()
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "mark_verified" not in page  # no door it cannot open
    detail = reverse("admin:endpoints_endpoint_change", args=[awaiting.pk])
    assert "Mark verified" not in client.get(detail).content.decode()


def test_the_permission_marks_verified_and_logs_who(client, awaiting):
    client.force_login(
        staff("vouch", "endpoints.view_endpoint", "endpoints.mark_endpoint_verified")
    )
    detail = reverse("admin:endpoints_endpoint_change", args=[awaiting.pk])
    page = client.get(detail).content.decode()
    assert "waiting for verification" in page
    assert "Mark verified" in page  # the page's own button
    listed = client.get(reverse(CHANGELIST)).content.decode()
    assert "Waiting for verification" in listed  # its state column
    assert awaiting.verification_challenge not in page
    mark(client, awaiting)
    awaiting.refresh_from_db()
    assert not awaiting.awaiting_verification
    assert awaiting.verified_by == "staff:vouch"
    entry = LogEntry.objects.get()
    assert (entry.object_id, entry.change_message, entry.user.username) == (
        awaiting.pk,
        "Marked verified by staff",
        "vouch",
    )


def test_the_permission_is_not_an_owners_portal_access(client, awaiting):
    """Vouching is a staff power, not membership: the portal stays closed."""
    client.force_login(
        staff("vouch", "endpoints.view_endpoint", "endpoints.mark_endpoint_verified")
    )
    url = reverse(
        "portal:endpoint_verification", args=[awaiting.merchant.slug, awaiting.pk]
    )
    response = client.post(url, {"challenge": awaiting.verification_challenge})
    assert response.status_code in (403, 404)
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification
