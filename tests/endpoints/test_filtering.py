"""Payload filters: a table of filters against events, and what is refused on save."""

from __future__ import annotations

import pytest

from endpoints.filtering import (
    MAX_FILTER_COST,
    filter_cost,
    filter_errors,
    filter_matches,
)

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


# -- what a filter may cost ---------------------------------------------------


def test_a_filter_past_the_cost_limit_is_refused_naming_it():
    costly = {"$or": [{"data": {f"k{i}": {"$gte": i}}} for i in range(40)]}
    assert filter_cost(costly) > MAX_FILTER_COST
    (error,) = filter_errors(costly)
    assert f"at most {MAX_FILTER_COST}" in error
    assert filter_errors({"$or": costly["$or"][:20]}) == []


def test_lists_of_objects_in_in_count_every_value_they_hold():
    choices = [{"x": list(range(10))} for _ in range(6)]  # 12 values each
    assert filter_cost({"data": {"a": {"$in": choices}}}) > MAX_FILTER_COST
    assert filter_errors({"data": {"a": {"$in": choices}}})


def test_a_long_in_of_plain_values_costs_one_step_and_keeps_json_equality():
    values = list(range(600))  # 3.5 KB: within MAX_FILTER_BYTES
    wanted = {"data": {"n": {"$in": [*values, "x", None, True]}}}
    assert filter_errors(wanted) == []
    assert filter_cost(wanted) == 3  # data, n, $in
    assert filter_matches(wanted, type="t", data={"n": 599.0})  # 599 == 599.0
    assert filter_matches(wanted, type="t", data={"n": None})
    assert filter_matches(wanted, type="t", data={"n": True})
    assert not filter_matches({"data": {"n": {"$in": [1]}}}, type="t", data={"n": True})
    assert not filter_matches({"data": {"n": {"$in": [True]}}}, type="t", data={"n": 1})
    assert not filter_matches(wanted, type="t", data={"n": "599"})
    assert filter_matches({"data": {"n": {"$nin": [1]}}}, type="t", data={"n": False})
    assert filter_matches(
        {"data": {"n": {"$in": [{"a": [1]}, 2]}}}, type="t", data={"n": {"a": [1.0]}}
    )


def test_a_filter_nested_far_too_deep_is_refused_not_a_crash():
    deep: dict = {"$exists": True}
    for _ in range(1000):
        deep = {"a": deep}
    assert "nests at most" in filter_errors({"data": deep})[0]


def test_the_fan_out_compiles_each_endpoints_filter_once():
    from types import SimpleNamespace

    from endpoints.filtering import endpoints_passing

    endpoint = SimpleNamespace(filter={"data": {"n": {"$in": [1, 2]}}})
    assert endpoints_passing([endpoint], type="t", data={"n": 2}) == [endpoint]
    kept = endpoint.__dict__["_compiled_filter"]
    assert endpoints_passing([endpoint], type="t", data={"n": 3}) == []
    assert endpoint.__dict__["_compiled_filter"] is kept
    endpoint.filter = {"data": {"n": 3}}  # a new filter is compiled anew
    assert endpoints_passing([endpoint], type="t", data={"n": 3}) == [endpoint]
