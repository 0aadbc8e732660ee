"""One sign-in throttle for admin and portal, per (username, real client address)."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
ADMIN_LOGIN = "/admin/login/"
PORTAL_LOGIN = "/portal/login/"


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def root(db) -> User:
    return User.objects.create_superuser("root", password=PASSWORD)


def sign_in(client: Client, url: str, password: str, username: str = "root", **extra):
    return client.post(
        url, {"username": username, "password": password, "next": "/admin/"}, **extra
    )


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_admin_locks_after_five_failures_even_for_the_right_password(root, caplog):
    client = Client()
    for _ in range(4):
        assert sign_in(client, ADMIN_LOGIN, "wrong").status_code == 200
    assert sign_in(client, ADMIN_LOGIN, "wrong").status_code == 429  # the 5th
    with caplog.at_level(logging.INFO, logger="axes"):
        locked = sign_in(client, ADMIN_LOGIN, PASSWORD)
    assert locked.status_code == 429
    assert not signed_in(client)
    assert "Too many failed sign-ins" in locked.content.decode()


def test_admin_and_portal_share_one_count(root):
    client = Client()
    for _ in range(3):
        sign_in(client, ADMIN_LOGIN, "wrong")
    for _ in range(2):
        sign_in(client, PORTAL_LOGIN, "wrong")
    assert sign_in(client, PORTAL_LOGIN, PASSWORD).status_code == 429
    assert sign_in(client, ADMIN_LOGIN, PASSWORD).status_code == 429


def test_lockouts_and_successful_sign_ins_are_logged(root, caplog):
    with caplog.at_level(logging.INFO, logger="axes"):
        assert sign_in(Client(), ADMIN_LOGIN, PASSWORD).status_code == 302
        for _ in range(5):
            sign_in(Client(), ADMIN_LOGIN, "wrong")
    assert 'Successful login by {username: "root"' in caplog.text
    assert 'Locking out {username: "root", ip_address: "127.0.0.1"' in caplog.text


def test_the_lockout_does_not_say_whether_the_account_exists(root):
    pages = []
    for username in ("root", "nobody-by-this-name"):
        client = Client()
        for _ in range(5):
            sign_in(client, PORTAL_LOGIN, "wrong", username=username)
        locked = sign_in(client, PORTAL_LOGIN, "wrong", username=username)
        assert locked.status_code == 429
        pages.append(locked.content.decode())
    assert pages[0] == pages[1]


def test_behind_a_trusted_proxy_the_lockout_is_per_client_address(root, settings):
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    attacker = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.5"}
    for _ in range(5):
        sign_in(Client(), ADMIN_LOGIN, "wrong", **attacker)
    assert sign_in(Client(), ADMIN_LOGIN, PASSWORD, **attacker).status_code == 429

    # The owner comes through the same proxy from elsewhere: not locked out.
    owner = Client()
    response = sign_in(
        owner,
        ADMIN_LOGIN,
        PASSWORD,
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_FOR="198.51.100.7",
    )
    assert response.status_code == 302
    assert signed_in(owner)


def test_a_forged_forwarded_for_from_an_untrusted_peer_does_not_reset_the_count(
    root, settings
):
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    for n in range(5):
        sign_in(
            Client(),
            ADMIN_LOGIN,
            "wrong",
            REMOTE_ADDR="192.0.2.10",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}",
        )
    again = sign_in(
        Client(),
        ADMIN_LOGIN,
        PASSWORD,
        REMOTE_ADDR="192.0.2.10",
        HTTP_X_FORWARDED_FOR="198.51.100.99",
    )
    assert again.status_code == 429
