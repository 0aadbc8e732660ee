"""A listen session is ended, never switched: PATCH is_active on one is a 422
and changes nothing (enabling an ended session would bring back an endpoint
the quota no longer counts; disabling a live one would leave its messages
pending instead of dead)."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.postgres

SESSIONS = "/merchants/acme/listen-sessions"


@pytest.mark.parametrize("ended", [True, False])
def test_patch_is_active_on_a_session_is_refused(scoped, merchant, ended):
    session = scoped.post(SESSIONS).json()["id"]
    if ended:
        assert scoped.delete(f"{SESSIONS}/{session}").status_code == 204
    before = row_counts()
    row = Endpoint.objects.get(pk=session)

    response = scoped.patch(
        f"/merchants/acme/endpoints/{session}", {"is_active": ended}
    )

    assert_problem(response, 422, ["body", "is_active"])
    assert row_counts() == before
    after = Endpoint.objects.get(pk=session)
    assert (after.is_active, after.updated_at) == (row.is_active, row.updated_at)
