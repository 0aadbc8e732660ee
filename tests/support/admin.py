"""A populated console: n rows in every admin list, and staff users; the
fixtures are used by the conftest.py of tests/deliveries/admin and tests/endpoints/admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User

from endpoints.models import ApiKey
from relayproject.lib.clock import utcnow
from tests.support import factories, seed

STATUSES = ("pending", "delivering", "succeeded", "dead")


def populate(n: int) -> dict:
    merchants = [factories.merchant() for _ in range(3)]
    endpoints = [
        factories.endpoint(merchants[i % 3], url=f"http://127.0.0.1:9/hook{i}")
        for i in range(n)
    ]
    now = utcnow()
    deliveries = []
    for i in range(n):
        status = STATUSES[i % 4]
        deliveries.append(
            seed.delivery(
                endpoints[i],
                status=status,
                created_at=now - timedelta(minutes=i),
                attempts=3,
                with_attempts=True,
                last_status_code=500,
                last_error="HTTP 500",
                succeeded_at=now if status == "succeeded" else None,
                dead_at=now - timedelta(minutes=i) if status == "dead" else None,
            )
        )
    for i in range(n):
        ApiKey.objects.create(
            name=f"key {i}",
            merchant=merchants[i % 3] if i % 2 else None,
            prefix=f"rk_{i:05d}",
            key_hash=f"{i:064x}",
        )
    return {"merchants": merchants, "endpoints": endpoints, "deliveries": deliveries}


def staff(username: str, *perms: str) -> User:
    user = User.objects.create_user(
        username, password="pw-for-tests-only", is_staff=True
    )
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return user


@pytest.fixture
def viewer_client(client):
    """Staff who may look at deliveries but not change them."""
    client.force_login(
        staff("viewer", "deliveries.view_delivery", "deliveries.view_event")
    )
    return client


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # Hashing the test users' passwords is not what these tests are about.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
