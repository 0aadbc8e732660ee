"""API keys in the admin: made with the full key shown once, revoked by an action."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from endpoints.apikeys import apikey_authenticate, apikey_create
from endpoints.models import ApiKey
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_adding_a_key_shows_the_full_key_once_and_stores_only_its_hash(admin_client):
    merchant = factories.merchant("acme")

    response = admin_client.post(
        reverse("admin:endpoints_apikey_add"),
        {"name": "billing", "merchant": merchant.pk},
    )

    assert response.status_code == 200
    full_key = re.search(
        r'<code id="new-api-key"[^>]*>([^<]+)</code>', response.content.decode()
    ).group(1)
    key = ApiKey.objects.get()
    assert (key.name, key.merchant, apikey_authenticate(full_key)) == (
        "billing",
        merchant,
        key,
    )
    assert full_key not in key.key_hash
    change_page = admin_client.get(
        reverse("admin:endpoints_apikey_change", args=[key.pk])
    )
    assert full_key not in change_page.content.decode()
    assert LogEntry.objects.filter(object_id=str(key.pk)).exists()


def test_revoke_selected_revokes_and_logs(admin_client):
    key, full_key = apikey_create(name="old")

    admin_client.post(
        reverse("admin:endpoints_apikey_changelist"),
        {"action": "revoke_selected", "_selected_action": [key.pk]},
    )

    key.refresh_from_db()
    assert key.revoked_at is not None
    assert apikey_authenticate(full_key) is None
    assert (
        LogEntry.objects.get(object_id=str(key.pk)).change_message == "Revoked the key."
    )


def test_keys_are_revoked_never_deleted_so_their_history_stays(admin_client):
    key, _ = apikey_create(name="old", merchant=None)
    changelist = admin_client.get(reverse("admin:endpoints_apikey_changelist"))

    actions = [
        choice[0]
        for choice in changelist.context["action_form"].fields["action"].choices
    ]
    assert "revoke_selected" in actions and "delete_selected" not in actions
    delete = admin_client.post(
        reverse("admin:endpoints_apikey_delete", args=[key.pk]), {"post": "yes"}
    )
    assert delete.status_code == 403
    assert ApiKey.objects.filter(pk=key.pk).exists()
