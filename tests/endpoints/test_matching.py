"""Event-type names and subscription patterns (endpoints/matching.py): the
whole value must match, so a trailing line break is not a name."""

from __future__ import annotations

import pytest

from endpoints.matching import is_valid_event_type, is_valid_subscription


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("order.paid", True),
        ("order_paid-2", True),
        ("a" * 255, True),
        ("a" * 256, False),
        ("order.paid\n", False),
        ("order.paid\r\n", False),
        ("\norder.paid", False),
        ("order..paid", False),
        ("order.*", False),
        ("", False),
    ],
)
def test_an_event_type_is_dot_separated_words_and_nothing_after(value, valid):
    assert is_valid_event_type(value) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("order.paid", True),
        ("order.*", True),
        ("order.*\n", False),
        ("order.paid\n", False),
        ("order.*.paid", False),
        ("*", False),
    ],
)
def test_a_subscription_is_a_type_or_a_prefix_star_and_nothing_after(value, valid):
    assert is_valid_subscription(value) is valid
