"""No escalation through the admin: memberships need their own permission, never self-granted."""

from __future__ import annotations

import logging

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import User
from django.urls import reverse

from endpoints.models import Membership
from tests.support import factories
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

MERCHANT_PERMS = (
    "endpoints.view_merchant",
    "endpoints.change_merchant",
    "endpoints.add_membership",
    "endpoints.change_membership",
    "endpoints.delete_membership",
    "endpoints.view_membership",
)


def merchant_form(merchant, *rows: dict) -> dict:
    data = {
        "slug": merchant.slug,
        "name": merchant.name,
        "is_active": "on",
        "membership_set-TOTAL_FORMS": str(len(rows)),
        "membership_set-INITIAL_FORMS": "0",
        "membership_set-MIN_NUM_FORMS": "0",
        "membership_set-MAX_NUM_FORMS": "1000",
    }
    for i, row in enumerate(rows):
        data.update({f"membership_set-{i}-{k}": v for k, v in row.items()})
        data[f"membership_set-{i}-merchant"] = str(merchant.pk)
    return data


def change_url(merchant) -> str:
    return reverse("admin:endpoints_merchant_change", args=[merchant.pk])


def test_merchant_and_membership_permissions_do_not_grant_memberships(client, caplog):
    victim = factories.merchant("victim")
    endpoint = factories.endpoint(victim)
    mallory = staff("mallory", *MERCHANT_PERMS)
    client.force_login(mallory)

    with caplog.at_level(logging.WARNING, logger="endpoints"):
        client.post(
            change_url(victim),
            merchant_form(victim, {"user": str(mallory.pk), "role": "owner"}),
        )

    assert not Membership.objects.filter(user=mallory).exists()
    assert "membership change refused" in caplog.text
    # So the portal still will not show mallory that merchant's secret.
    reveal = client.post(
        reverse("portal:secret_reveal", args=[victim.slug, endpoint.pk])
    )
    assert reveal.status_code == 404
    assert "whsec_" not in reveal.content.decode()


@pytest.mark.parametrize("superuser", [False, True], ids=["granter", "superuser"])
def test_nobody_grants_themselves_a_membership(client, caplog, superuser):
    victim = factories.merchant("victim")
    granter = staff("granter", *MERCHANT_PERMS, "endpoints.grant_membership")
    User.objects.filter(pk=granter.pk).update(is_superuser=superuser)
    client.force_login(granter)

    with caplog.at_level(logging.WARNING, logger="endpoints"):
        response = client.post(
            change_url(victim),
            merchant_form(victim, {"user": str(granter.pk), "role": "owner"}),
        )

    assert response.status_code == 200  # the form again, with the error
    assert "membership of your own" in response.content.decode()
    assert not Membership.objects.exists()
    assert "membership self-grant refused" in caplog.text


def test_a_granter_grants_others_and_each_grant_is_in_the_admin_log(client):
    merchant = factories.merchant("acme")
    alice = User.objects.create_user("alice")
    granter = staff("granter", *MERCHANT_PERMS, "endpoints.grant_membership")
    client.force_login(granter)

    response = client.post(
        change_url(merchant),
        merchant_form(merchant, {"user": str(alice.pk), "role": "developer"}),
    )

    assert response.status_code == 302
    membership = Membership.objects.get(user=alice)
    entry = LogEntry.objects.get(
        object_id=str(membership.pk), content_type__model="membership"
    )
    assert (entry.user_id, entry.action_flag) == (granter.pk, ADDITION)
    assert "alice" in entry.change_message


def test_staff_who_may_change_users_cannot_make_themselves_superuser(client):
    mallory = staff("mallory", "auth.view_user", "auth.change_user")
    client.force_login(mallory)
    url = reverse("admin:auth_user_change", args=[mallory.pk])
    client.post(
        url,
        {
            "username": "mallory",
            "is_active": "on",
            "is_staff": "on",
            "is_superuser": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    mallory.refresh_from_db()
    assert not mallory.is_superuser
