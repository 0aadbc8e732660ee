"""Payload filters per endpoint: which events an endpoint wants, beyond its types.

A filter is a JSON object over the event's `type` and `data`, in the style of
MongoDB queries (and Hookdeck Outpost's filters):

    {"type": "order.created", "data": {"amount": {"$gte": 100},
                                       "currency": {"$in": ["EUR", "USD"]}}}

- A plain value matches an equal value (1 and 1.0 are equal; true and 1 are not).
- An object of field names descends into an object: every field must match.
  A field the event lacks matches only `{"$exists": false}`.
- Operators: `$eq`, `$ne`, `$in`, `$nin`, `$exists`, `$gt`, `$gte`, `$lt`,
  `$lte` (numbers only: a string compared to a number never matches),
  `$and`, `$or` (lists of patterns), `$not` (a pattern).

`filter_errors` checks a filter when it is saved; `filter_matches` runs at
fan-out and never raises on any event data.

What a filter may cost is bounded when it is saved, so a publish's fan-out
work is too (MAX_DELIVERIES_PER_REQUEST bounds the evaluations): at most
MAX_FILTER_BYTES of JSON, MAX_DEPTH levels, and MAX_FILTER_COST steps per
event (`filter_cost`: each field, operator and compared value counts; an
`$in` or `$nin` of plain values is one set lookup, compiled once per filter
by `filter_compile`, however long its list).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from relayproject.lib.jsonlimits import json_depth

MAX_FILTER_BYTES = 4096
MAX_DEPTH = 12
MAX_FILTER_COST = 64  # steps per event, each about a microsecond at most
TOP_LEVEL_FIELDS = ("type", "data")
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
VALUE_OPERATORS = {"$eq", "$ne", "$in", "$nin", "$exists", *COMPARISONS}
LOGICAL_OPERATORS = {"$and", "$or", "$not"}
_MISSING = object()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(a: object, b: object) -> bool:
    # JSON has no int/bool confusion: true is not 1, although Python says so.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _plain_key(value: object) -> tuple | None:
    """A hashable stand-in with JSON's equality (`_equal`) for a plain value:
    1 and 1.0 share one, true and 1 do not; None for objects and lists."""
    if isinstance(value, bool):
        return ("bool", value)
    if _is_number(value):
        return ("number", value)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("null",)
    return None


class _Choices:
    """The list of an $in or $nin: plain values in a set, the rest compared."""

    __slots__ = ("plain", "others")

    def __init__(self, choices: list) -> None:
        keys = [_plain_key(c) for c in choices]
        self.plain = frozenset(k for k in keys if k is not None)
        self.others = [c for c, k in zip(choices, keys, strict=True) if k is None]

    def __contains__(self, value: object) -> bool:
        key = _plain_key(value)
        if key is not None:
            return key in self.plain
        return any(_equal(value, choice) for choice in self.others)


# -- matching (fan-out) ------------------------------------------------------


def filter_compile(filter: dict) -> dict:
    """The filter with each $in/$nin list made a _Choices; match it with
    `compiled_matches`. Pure: the stored filter is not changed."""
    return _compiled(filter)


def _compiled(pattern: object) -> object:
    if not isinstance(pattern, dict):
        return pattern
    out = {}
    for key, operand in pattern.items():
        if key in ("$in", "$nin") and isinstance(operand, list):
            out[key] = _Choices(operand)
        elif key in ("$and", "$or") and isinstance(operand, list):
            out[key] = [_compiled(p) for p in operand]
        elif key == "$not" or not key.startswith("$"):
            out[key] = _compiled(operand)
        else:
            out[key] = operand
    return out


def compiled_matches(compiled: dict | None, *, type: str, data: object) -> bool:
    if not compiled:
        return True
    return _match(compiled, {"type": type, "data": data})


def filter_matches(filter: dict | None, *, type: str, data: object) -> bool:
    """True when the event passes the filter; no filter passes everything."""
    if not filter:
        return True
    return compiled_matches(filter_compile(filter), type=type, data=data)


def _match(pattern: object, value: object) -> bool:
    if not isinstance(pattern, dict):
        return value is not _MISSING and _equal(pattern, value)
    for key, operand in pattern.items():
        if key.startswith("$"):
            if not _operator(key, operand, value):
                return False
        else:
            child = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
            if not _match(operand, child):
                return False
    return True


def _operator(name: str, operand: object, value: object) -> bool:
    if name == "$exists":
        return (value is not _MISSING) == bool(operand)
    if name == "$and":
        return all(_match(p, value) for p in operand)
    if name == "$or":
        return any(_match(p, value) for p in operand)
    if name == "$not":
        return not _match(operand, value)
    if value is _MISSING:
        # A missing field equals nothing, so only "not equal / not in" hold.
        return name in ("$ne", "$nin")
    if name == "$eq":
        return _equal(value, operand)
    if name == "$ne":
        return not _equal(value, operand)
    if name == "$in":
        return value in operand  # a _Choices (filter_compile)
    if name == "$nin":
        return value not in operand
    compare = COMPARISONS[name]
    return _is_number(value) and compare(value, operand)


# -- validation (save time) --------------------------------------------------


def filter_errors(filter: object) -> list[str]:
    """Why a filter cannot be saved, each message naming where; [] when it can."""
    if filter is None:
        return []
    if not isinstance(filter, dict):
        return ['A filter is a JSON object, e.g. {"data": {"amount": {"$gte": 100}}}.']
    # Before json.dumps, which recurses: every level of a valid filter is a
    # field, an operator or an $and/$or list, at most twice MAX_DEPTH.
    if json_depth(filter, stop_above=2 * MAX_DEPTH + 2) > 2 * MAX_DEPTH + 2:
        return [f"A filter nests at most {MAX_DEPTH} fields deep."]
    if len(json.dumps(filter)) > MAX_FILTER_BYTES:
        return [f"A filter is at most {MAX_FILTER_BYTES} bytes of JSON."]
    errors = _structure_errors(filter)
    if not errors and (cost := filter_cost(filter)) > MAX_FILTER_COST:
        errors.append(
            f"This filter costs {cost} steps to check against each event, at "
            f"most {MAX_FILTER_COST}: each field, operator and value compared "
            "counts one (a list of plain values in $in or $nin counts one "
            "whatever its length). Simplify it, or split it across endpoints."
        )
    return errors


def filter_cost(filter: dict) -> int:
    """Steps `filter_matches` takes on any event at most (a filter that
    filter_errors has found well formed): the work bound of one evaluation."""
    return _pattern_cost(filter)


def _size(value: object) -> int:
    """Values in a JSON value, itself included: what `_equal` may walk."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total


def _pattern_cost(pattern: object) -> int:
    if not isinstance(pattern, dict):
        return _size(pattern)  # equality with a plain value, object or list
    cost = 0
    for key, operand in pattern.items():
        cost += 1
        if key in ("$and", "$or"):
            cost += sum(_pattern_cost(p) for p in operand)
        elif key == "$not" or not key.startswith("$"):
            cost += _pattern_cost(operand)
        elif key in ("$in", "$nin"):
            cost += sum(_size(c) for c in operand if _plain_key(c) is None)
        elif key in ("$eq", "$ne"):
            cost += _size(operand)
    return cost


def _structure_errors(filter: dict) -> list[str]:
    errors: list[str] = []
    for key, operand in filter.items():
        if key.startswith("$"):
            _check_operator(key, operand, key, errors, depth=1, top=True)
        elif key not in TOP_LEVEL_FIELDS:
            errors.append(
                f'{key}: only "type" and "data" (or $and, $or, $not) can be '
                "filtered at the top level."
            )
        else:
            _check_pattern(operand, key, errors, depth=1)
    return errors


def _check_pattern(pattern: object, where: str, errors: list[str], *, depth: int):
    if depth > MAX_DEPTH:
        errors.append(f"{where}: nested deeper than {MAX_DEPTH} levels.")
        return
    if not isinstance(pattern, dict):
        return  # a plain value: equality
    for key, operand in pattern.items():
        if key.startswith("$"):
            _check_operator(key, operand, f"{where}.{key}", errors, depth=depth)
        else:
            _check_pattern(operand, f"{where}.{key}", errors, depth=depth + 1)


def _check_operator(
    name: str, operand: object, where: str, errors: list[str], *, depth: int, top=False
) -> None:
    if name not in VALUE_OPERATORS | LOGICAL_OPERATORS:
        known = ", ".join(sorted(VALUE_OPERATORS | LOGICAL_OPERATORS))
        errors.append(f"{where}: unknown operator {name}; use one of {known}.")
    elif top and name in VALUE_OPERATORS:
        errors.append(f'{where}: {name} needs a field ("type" or "data").')
    elif name in ("$and", "$or"):
        if not isinstance(operand, list) or not operand:
            errors.append(f"{where}: {name} takes a non-empty list of patterns.")
            return
        for i, item in enumerate(operand):
            if not isinstance(item, dict):
                errors.append(f"{where}[{i}]: each item is an object pattern.")
            elif top:
                errors.extend(f"{where}[{i}]: {e}" for e in _structure_errors(item))
            else:
                _check_pattern(item, f"{where}[{i}]", errors, depth=depth + 1)
    elif name == "$not":
        if not isinstance(operand, dict):
            errors.append(f"{where}: $not takes an object pattern.")
        elif top:
            errors.extend(f"{where}: {e}" for e in _structure_errors(operand))
        else:
            _check_pattern(operand, where, errors, depth=depth + 1)
    elif name in ("$in", "$nin"):
        if not isinstance(operand, list):
            errors.append(f"{where}: {name} takes a list of values.")
    elif name == "$exists":
        if not isinstance(operand, bool):
            errors.append(f"{where}: $exists takes true or false.")
    elif name in COMPARISONS and not _is_number(operand):
        errors.append(f"{where}: {name} compares numbers; give it a number.")


def endpoints_passing(endpoints: list, *, type: str, data: object) -> list:
    """The endpoints among these whose filter lets this event through (fan-out).

    Each endpoint keeps its compiled filter (as long as its filter is the same
    object): endpoints come from a process's audience cache, so a filter is
    compiled once, not once per event.
    """
    return [
        e for e in endpoints if compiled_matches(_compiled_of(e), type=type, data=data)
    ]


def _compiled_of(endpoint) -> dict | None:
    if not endpoint.filter:
        return None
    kept = endpoint.__dict__.get("_compiled_filter")
    if kept is None or kept[0] is not endpoint.filter:
        # One assignment of an immutable pair: safe to race between threads.
        kept = (endpoint.filter, filter_compile(endpoint.filter))
        endpoint.__dict__["_compiled_filter"] = kept
    return kept[1]
