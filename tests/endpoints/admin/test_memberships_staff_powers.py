"""No staff permission short of superuser acts as a merchant owner or mints
platform power: passwords and emails of users with rights, API keys, owner links."""

from __future__ import annotations

import logging

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import User
from django.urls import reverse

from endpoints.models import ApiKey, Membership
from tests.support import factories
from tests.support.admin import staff
from tests.support.api import Api

pytestmark = pytest.mark.django_db

OLD_PASSWORD = "the old password, kept"
NEW_PASSWORD = "a new password of mallory's"


def portal_owner() -> User:
    owner = User.objects.create_user("owner", "owner@acme.test", OLD_PASSWORD)
    Membership.objects.create(
        user=owner, merchant=factories.merchant("acme"), role="owner"
    )
    return owner


def granter() -> User:
    user = staff("granter", "endpoints.grant_membership")
    user.email = "granter@relay.test"
    user.set_password(OLD_PASSWORD)
    user.save()
    return user


def password_url(user: User) -> str:
    return reverse("admin:auth_user_password_change", args=[user.pk])


@pytest.fixture
def mallory(client):
    """Staff who may change users, and nothing else."""
    client.force_login(staff("mallory", "auth.view_user", "auth.change_user"))
    return client


@pytest.mark.parametrize("victim", [portal_owner, granter], ids=["owner", "granter"])
def test_change_user_alone_cannot_change_the_password_of_a_user_with_rights(
    mallory, caplog, victim
):
    target = victim()
    with caplog.at_level(logging.WARNING, logger="endpoints"):
        form = mallory.get(password_url(target))
        posted = mallory.post(
            password_url(target),
            {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
        )

    assert (form.status_code, posted.status_code) == (403, 403)
    assert "Only superusers change the password" in form.content.decode()
    target.refresh_from_db()
    assert target.check_password(OLD_PASSWORD)
    assert not target.check_password(NEW_PASSWORD)
    assert caplog.text.count("password change refused") == 2
    # Nor can the email be pointed elsewhere (a reset would go there).
    mallory.post(
        reverse("admin:auth_user_change", args=[target.pk]),
        {
            "username": target.username,
            "email": "mallory@evil.test",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    target.refresh_from_db()
    assert target.email != "mallory@evil.test"


def test_change_user_still_resets_a_user_without_any_rights(mallory):
    plain = User.objects.create_user("plain", password=OLD_PASSWORD)

    assert mallory.get(password_url(plain)).status_code == 200
    mallory.post(
        password_url(plain), {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    )

    plain.refresh_from_db()
    assert plain.check_password(NEW_PASSWORD)


def test_a_superuser_changes_an_owners_password_and_it_is_logged(admin_client):
    owner = portal_owner()

    admin_client.post(
        password_url(owner), {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    )

    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)
    assert LogEntry.objects.filter(
        object_id=str(owner.pk), change_message__icontains="password"
    ).exists()


def add_key(client, **fields):
    return client.post(reverse("admin:endpoints_apikey_add"), fields)


def test_add_apikey_alone_makes_no_key_at_all(client):
    acme = factories.merchant("acme")
    client.force_login(
        staff(
            "mallory",
            "endpoints.view_apikey",
            "endpoints.add_apikey",
            "endpoints.change_apikey",
        )
    )

    assert client.get(reverse("admin:endpoints_apikey_add")).status_code == 403
    platform = add_key(client, name="platform", merchant="")
    scoped = add_key(client, name="scoped", merchant=acme.pk)

    assert (platform.status_code, scoped.status_code) == (403, 403)
    # So there is no key to mint an owner link with, for any merchant.
    assert not ApiKey.objects.exists()


@pytest.fixture
def creator(client):
    """Staff with the dedicated permission to make merchant keys."""
    client.force_login(
        staff("creator", "endpoints.view_apikey", "endpoints.create_api_key")
    )
    return client


def test_create_api_key_makes_no_platform_key(creator):
    response = add_key(creator, name="platform", merchant="")

    assert response.status_code == 200  # the form again, the error by the field
    assert "This field is required" in response.content.decode()
    assert not ApiKey.objects.exists()


def test_a_key_made_without_superuser_cannot_mint_an_owner_link(creator, caplog):
    acme = factories.merchant("acme")
    with caplog.at_level(logging.INFO, logger="endpoints"):
        # owner_links is not on their form; a forged field is ignored.
        response = add_key(creator, name="acme", merchant=acme.pk, owner_links="on")
    assert response.status_code == 200
    key = ApiKey.objects.get()
    full_key = response.context["full_key"]
    api = Api(full_key)

    owner = api.post("/merchants/acme/portal-sessions", {"role": "owner"})
    developer = api.post("/merchants/acme/portal-sessions", {"role": "developer"})

    assert (key.merchant, key.owner_links) == (acme, False)
    assert owner.status_code == 403
    assert owner["Content-Type"] == "application/problem+json"
    assert "owner links" in owner.json()["detail"]
    assert developer.status_code == 201
    entry = LogEntry.objects.get(object_id=str(key.pk))
    assert entry.action_flag == ADDITION
    assert f"prefix={key.prefix} merchant=acme owner_links=False" in caplog.text


def test_only_a_superuser_makes_platform_keys_and_owner_link_keys(admin_client):
    acme = factories.merchant("acme")

    add_key(admin_client, name="platform", merchant="")
    add_key(admin_client, name="acme", merchant=acme.pk, owner_links="on")

    platform, scoped = ApiKey.objects.order_by("pk")
    assert platform.is_platform and platform.may_make_owner_links
    assert scoped.owner_links and scoped.may_make_owner_links
