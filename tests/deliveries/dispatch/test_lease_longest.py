"""The default lease covers the longest timeout an endpoint may ask for, so a
job of such an endpoint can always start and end within its lease."""

from __future__ import annotations

import pytest

from deliveries.dispatch.lease import default_lease_seconds, start_margin
from deliveries.dispatch.sendloop import DEADLINE_GRACE_SECONDS


@pytest.mark.parametrize("longest", [10.0, 60.0, 300.0, 900.0])
def test_the_default_lease_holds_two_of_the_longest_sends(longest):
    lease = default_lease_seconds(
        batch_size=200, concurrency=512, timeout=10, longest=longest
    )

    need = start_margin(
        lease_seconds=lease, timeout=longest, grace=DEADLINE_GRACE_SECONDS
    )
    assert need == longest + DEADLINE_GRACE_SECONDS  # checked, not waived
    assert lease >= 2 * need


def test_without_a_longer_timeout_the_lease_is_as_before():
    assert default_lease_seconds(batch_size=200, concurrency=512, timeout=10) == 80
