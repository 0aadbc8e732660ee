"""Operational endpoints (the platform's own, platform keys only) are not
held for verification, made or moved."""

from __future__ import annotations

import pytest

from deliveries.notifications.services import (
    operational_endpoint_create,
    operational_endpoint_update,
)
from endpoints import verification
from relayproject.lib.clock import utcnow

pytestmark = pytest.mark.django_db


def test_operational_endpoints_are_not_held_for_verification(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    ops = operational_endpoint_create(url="http://127.0.0.1:9/ops", now=utcnow())
    assert not ops.awaiting_verification
    ops = operational_endpoint_update(
        endpoint=ops, url="http://127.0.0.1:9/moved", now=utcnow()
    )
    assert not ops.awaiting_verification
    assert verification.state(ops) == "verified"
    assert ops.verified_by == "platform"
