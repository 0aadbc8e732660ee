"""Public ids: the encoding is fixed (partitions and cursors rely on its order)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from relayproject.lib.ids import _encode, id_floor, new_id


@pytest.mark.parametrize(
    ("value", "length", "text"),
    [
        (0, 10, "0000000000"),
        (31, 2, "0z"),
        (32, 2, "10"),
        (2**50 - 1, 10, "zzzzzzzzzz"),
        (0b10000_00001_00010_00011, 4, "g123"),
    ],
)
def test_encoding_is_crockford_base32_most_significant_first(value, length, text):
    assert _encode(value, length) == text


def test_an_id_is_its_time_floor_then_sixteen_random_digits():
    at = datetime(2026, 12, 3, 6, 44, 0, 123000, tzinfo=UTC)
    made = new_id("evt", at=at)

    assert made.startswith(id_floor("evt", at))
    assert len(made) == len("evt_") + 26
    assert new_id("evt", at=at) != made


def test_ids_sort_by_time():
    earlier = new_id("dlv", at=datetime(2026, 1, 1, tzinfo=UTC))
    later = new_id("dlv", at=datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=UTC))
    assert earlier < later


def test_the_random_digits_are_every_digit_alike():
    # Drawn a byte at a time (relayproject/lib/ids.py): each of the 32 digits
    # takes 8 of the 256 byte values.
    from collections import Counter

    from relayproject.lib.ids import _ALPHABET, _DIGIT_OF_BYTE

    assert Counter(_DIGIT_OF_BYTE.decode()) == {d: 8 for d in _ALPHABET}


def test_a_batch_of_ids_shares_the_time_and_differs_in_the_rest():
    from relayproject.lib.ids import new_ids

    at = datetime(2026, 12, 3, 6, 44, 0, 123000, tzinfo=UTC)
    made = new_ids("dlv", 500, at=at)

    assert len(set(made)) == 500
    assert all(m.startswith(id_floor("dlv", at)) and len(m) == 30 for m in made)
