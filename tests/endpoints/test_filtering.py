"""Payload filters: a table of filters against events, and what is refused on save."""

from __future__ import annotations

import pytest

from endpoints.filtering import filter_errors, filter_matches

ORDER = {
    "amount": 120,
    "currency": "EUR",
    "paid": True,
    "customer": {"id": "c1", "tier": "gold", "tags": ["b2b"]},
    "note": None,
}

MATCHES = [
    # (filter, type, data, expected)
    (None, "order.created", ORDER, True),
    ({}, "order.created", ORDER, True),
    ({"type": "order.created"}, "order.created", ORDER, True),
    ({"type": "order.created"}, "order.paid", ORDER, False),
    ({"type": {"$in": ["order.paid", "order.created"]}}, "order.created", ORDER, True),
    ({"type": {"$nin": ["order.created"]}}, "order.created", ORDER, False),
    ({"data": {"currency": "EUR"}}, "t", ORDER, True),
    ({"data": {"currency": "USD"}}, "t", ORDER, False),
    ({"data": {"customer": {"tier": "gold"}}}, "t", ORDER, True),
    ({"data": {"customer": {"tier": {"$ne": "gold"}}}}, "t", ORDER, False),
    ({"data": {"amount": {"$gte": 120}}}, "t", ORDER, True),
    ({"data": {"amount": {"$gt": 120}}}, "t", ORDER, False),
    ({"data": {"amount": {"$lt": 120.5, "$gt": 100}}}, "t", ORDER, True),
    ({"data": {"amount": {"$lte": 119}}}, "t", ORDER, False),
    ({"data": {"amount": 120.0}}, "t", ORDER, True),  # 120 == 120.0 in JSON
    # type mismatches never match
    ({"data": {"amount": "120"}}, "t", ORDER, False),
    ({"data": {"currency": {"$gt": 1}}}, "t", ORDER, False),
    ({"data": {"paid": 1}}, "t", ORDER, False),  # true is not 1
    ({"data": {"amount": True}}, "t", {"amount": 1}, False),
    ({"data": {"customer": "c1"}}, "t", ORDER, False),
    ({"data": {"amount": {"x": 1}}}, "t", ORDER, False),  # descending into a number
    # missing fields
    ({"data": {"refund": 1}}, "t", ORDER, False),
    ({"data": {"refund": {"$exists": False}}}, "t", ORDER, True),
    ({"data": {"refund": {"$exists": True}}}, "t", ORDER, False),
    ({"data": {"note": {"$exists": True}}}, "t", ORDER, True),  # null is present
    ({"data": {"note": None}}, "t", ORDER, True),
    ({"data": {"refund": {"$ne": 5}}}, "t", ORDER, True),
    ({"data": {"refund": {"$gt": 5}}}, "t", ORDER, False),
    ({"data": {"customer": {"deep": {"er": 1}}}}, "t", ORDER, False),
    ({"data": {"x": 1}}, "t", [1, 2], False),  # data that is not an object
    # logic
    (
        {"$or": [{"type": "order.paid"}, {"data": {"amount": {"$gt": 100}}}]},
        "order.created",
        ORDER,
        True,
    ),
    (
        {"$and": [{"type": "order.created"}, {"data": {"currency": "USD"}}]},
        "order.created",
        ORDER,
        False,
    ),
    ({"$not": {"type": "order.created"}}, "order.created", ORDER, False),
    ({"data": {"amount": {"$not": {"$lt": 100}}}}, "t", ORDER, True),
    (
        {"data": {"currency": {"$or": [{"$eq": "USD"}, {"$eq": "EUR"}]}}},
        "t",
        ORDER,
        True,
    ),
    ({"data": {"customer": {"tags": ["b2b"]}}}, "t", ORDER, True),
    ({"data": {"customer": {"tags": {"$eq": ["b2c"]}}}}, "t", ORDER, False),
    ({"data": {"customer": {"$eq": {"id": "c1"}}}}, "t", ORDER, False),
]


@pytest.mark.parametrize(("filter", "type", "data", "expected"), MATCHES)
def test_filter_against_event(filter, type, data, expected):
    assert filter_errors(filter) == []
    assert filter_matches(filter, type=type, data=data) is expected


REFUSED = [
    ([1], "JSON object"),
    ("order", "JSON object"),
    ({"merchant": "acme"}, "merchant: only"),
    ({"data": {"amount": {"$gte": "100"}}}, "data.amount.$gte: $gte compares numbers"),
    ({"data": {"amount": {"$between": [1, 2]}}}, "unknown operator $between"),
    ({"data": {"x": {"$in": "a"}}}, "data.x.$in: $in takes a list"),
    ({"data": {"x": {"$exists": "yes"}}}, "$exists takes true or false"),
    ({"$or": []}, "$or takes a non-empty list"),
    ({"$or": [1]}, "$or[0]: each item is an object"),
    ({"$or": [{"tipe": "a"}]}, "$or[0]: tipe: only"),
    ({"$gt": 1}, "$gt needs a field"),
    ({"data": {"$not": 3}}, "$not takes an object"),
    ({"data": {"a": {"b": 1}} | {"s": "x" * 5000}}, "at most 4096 bytes"),
]


@pytest.mark.parametrize(("filter", "message"), REFUSED)
def test_bad_filters_are_refused_with_where(filter, message):
    errors = filter_errors(filter)
    assert any(message in e for e in errors), errors


def test_a_filter_nested_too_deep_is_refused():
    pattern: dict = {"$exists": True}
    for _ in range(20):
        pattern = {"a": pattern}
    assert any("deeper than" in e for e in filter_errors({"data": pattern}))
