"""The acceptance tests that matter most, run as they are on a Citus cluster.

The same test functions as tests/acceptance (real dispatcher processes, a
real receiver, the same assertions), collected here with this tier's
fixtures: the database is the run's Citus database, distributed by
merchant (tests/citus/conftest.py).
"""

from __future__ import annotations

import pytest

from tests.acceptance.test_dispatcher_race import (
    test_three_dispatchers_deliver_each_of_1000_deliveries_exactly_once,
)
from tests.acceptance.test_fairness import (
    test_a_merchants_cap_holds_across_two_dispatchers,
    test_a_quiet_merchant_waits_no_longer_than_a_claim_behind_a_noisy_one,
    test_max_in_flight_holds_across_two_dispatchers,
)
from tests.acceptance.test_kill_recovery import (
    test_dispatchers_killed_mid_batch_resend_only_what_their_expired_leases_held,
)
from tests.acceptance.test_lease_fencing import (
    test_a_late_outcome_from_an_expired_lease_is_fenced_off,
)

pytestmark = [pytest.mark.citus, pytest.mark.django_db(transaction=True)]

__all__ = [
    "test_a_late_outcome_from_an_expired_lease_is_fenced_off",
    "test_a_merchants_cap_holds_across_two_dispatchers",
    "test_a_quiet_merchant_waits_no_longer_than_a_claim_behind_a_noisy_one",
    "test_dispatchers_killed_mid_batch_resend_only_what_their_expired_leases_held",
    "test_max_in_flight_holds_across_two_dispatchers",
    "test_three_dispatchers_deliver_each_of_1000_deliveries_exactly_once",
]
