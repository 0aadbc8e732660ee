"""The portal's fixtures: a world of two merchants (tests/support/portal.py),
fast password hashing and a fresh cache for every test in this folder."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from endpoints.models import Membership
from tests.support import factories
from tests.support.portal import Side, World, dead_delivery, user_with_role


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # The production hasher is slow on purpose; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def world(db) -> World:
    sides = []
    for slug in ("acme", "globex"):
        merchant = factories.merchant(slug)
        endpoint = factories.endpoint(merchant)
        sides.append(Side(merchant, endpoint, dead_delivery(endpoint)))
    mine, theirs = sides
    owner = user_with_role(mine.merchant, Membership.Role.OWNER, "owner")
    viewer = user_with_role(mine.merchant, Membership.Role.VIEWER, "viewer")
    user_with_role(theirs.merchant, Membership.Role.OWNER, "rival")
    return World(mine=mine, theirs=theirs, owner=owner, viewer=viewer)
