"""endpoint_rotate_secret with an overlap: 0 stops every older secret at once,
and an overlap out of bounds changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from endpoints.secret_rotation import endpoint_rotate_secret
from endpoints.selectors import live_secrets
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = pytest.mark.django_db


def signing(endpoint, now) -> list[str]:
    return live_secrets(endpoint_ids=[endpoint.pk], now=now)[endpoint.pk]


def test_overlap_0_stops_both_secrets_of_a_rotation_still_in_its_overlap():
    endpoint = factories.endpoint()
    now = utcnow() + timedelta(seconds=1)  # past the first secret's creation
    endpoint_rotate_secret(endpoint=endpoint, now=now, overlap_seconds=2 * 86400)
    assert len(signing(endpoint, now)) == 2

    later = now + timedelta(minutes=5)
    newest, expires = endpoint_rotate_secret(
        endpoint=endpoint, now=later, overlap_seconds=0
    )

    assert expires == later
    assert signing(endpoint, later) == [newest.secret]
    assert endpoint.secrets.filter(expires_at=later).count() == 2


@pytest.mark.parametrize("overlap", [-1, 7 * 86400 + 1])
def test_an_overlap_out_of_bounds_is_refused_and_nothing_changes(overlap):
    endpoint = factories.endpoint()

    with pytest.raises(ValidationError) as refused:
        endpoint_rotate_secret(endpoint=endpoint, now=utcnow(), overlap_seconds=overlap)

    assert "from 0 to 604800 seconds" in str(refused.value.message_dict)
    assert endpoint.secrets.get().expires_at is None
