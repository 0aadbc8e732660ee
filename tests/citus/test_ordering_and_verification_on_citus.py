"""Ordered lanes and endpoint verification (issue 25) on a Citus cluster: the
acceptance tests of tests/acceptance, run as they are with this tier's
fixtures (tests/citus/conftest.py), so their columns and statements are
tried on a database distributed by merchant."""

from __future__ import annotations

import pytest

from tests.acceptance.test_endpoint_verification import (
    test_a_receiver_that_does_not_echo_gets_only_challenges_until_pasted,
    test_an_echoing_receiver_is_verified_and_gets_the_held_events_in_order,
)
from tests.acceptance.test_ordered_lanes import (
    test_a_dead_letter_lets_its_lane_go_on_and_its_replay_goes_out_of_order,
    test_a_dispatcher_killed_mid_lane_leaves_the_order_whole,
    test_two_dispatchers_keep_each_keys_order_through_retries_and_leave_others_alone,
)

pytestmark = [pytest.mark.citus]

__all__ = [
    "test_a_dead_letter_lets_its_lane_go_on_and_its_replay_goes_out_of_order",
    "test_a_dispatcher_killed_mid_lane_leaves_the_order_whole",
    "test_a_receiver_that_does_not_echo_gets_only_challenges_until_pasted",
    "test_an_echoing_receiver_is_verified_and_gets_the_held_events_in_order",
    "test_two_dispatchers_keep_each_keys_order_through_retries_and_leave_others_alone",
]
