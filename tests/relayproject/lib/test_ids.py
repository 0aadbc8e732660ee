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
