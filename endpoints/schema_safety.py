"""Catalogue schemas that never reach out and never backtrack.

A schema is staff input evaluated by the web process against merchant data,
so three things jsonschema does by default are taken away from it:

- retrieval: only local `$ref`s (`#...`) are accepted at save time, and every
  validator is built on a `referencing` Registry that cannot retrieve
  anything, so even a schema stored before this check never fetches a URL;
- backtracking: `pattern` and `patternProperties` (and the
  `additionalProperties` that depends on them) run on RE2, whose time is
  linear in the input; a pattern RE2 cannot compile is refused at save time;
- unbounded work: `uniqueItems` is linear instead of quadratic, and one
  validation may spend at most `step_budget(data)` steps, so `$ref` chains
  that fan out exponentially end in a refusal, not a stuck worker. A step is
  charged for the work a keyword does, not for the call: `enum`, `required`
  and `dependentRequired` cost one per listed item, `const` one per JSON
  value in it, `patternProperties` one per pattern and key tried, and every
  error built costs one more. Only the first few errors are built (a
  publish shows MAX_ERRORS), and the lists behind those keywords are capped
  at save time (endpoints/schema_checks.py), so a schema cannot make each
  call expensive either.
"""

from __future__ import annotations

import contextvars
import functools
import itertools

import re2
import referencing
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend, validator_for

# One validation may evaluate this many keywords, plus STEPS_PER_VALUE for
# each JSON value in the data: a realistic schema spends a handful per value.
BASE_STEPS = 10_000
STEPS_PER_VALUE = 50
# No more errors than this are ever built for one validation (the publish
# answer shows at most this many per event).
MAX_ERRORS = 5
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Values under these keywords are data, not schemas: a "$ref" in them is inert.
DATA_KEYWORDS = frozenset({"const", "enum", "examples", "default"})
# A schema that names no dialect is read as 2020-12.
DEFAULT_VALIDATOR = Draft202012Validator
# Nothing can be fetched: a missing resource is Unresolvable, never a request.
NO_RETRIEVAL = referencing.Registry()

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the caller's answer
_steps_left: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "schema_steps_left", default=None
)


class SchemaTooCostly(Exception):
    """The validation spent its step budget (or recursed without end)."""


class UnsafePattern(Exception):
    """A pattern RE2 cannot run (backreferences, lookaround, too large)."""


@functools.lru_cache(maxsize=2048)
def compiled(pattern: str):
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        raise UnsafePattern(pattern) from exc


def _search(pattern: str, text: str) -> bool:
    return compiled(pattern).search(text) is not None


# --- keywords on RE2 -------------------------------------------------------


def _pattern(validator, patrn, instance, schema):
    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(
                    value, subschema, path=key, schema_path=pattern
                )


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in properties and not any(_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        # The messages jsonschema's own keyword gives.
        names = ", ".join(repr(extra) for extra in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(
                f"{names} {verb} not match any of the regexes: {regexes}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({names} {verb} unexpected)"
            )


def _canonical(value: object) -> object:
    """A hashable form equal exactly when JSON Schema calls two values equal
    (1 == 1.0, true != 1, objects regardless of key order)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return (type(value).__name__, value)


def _unique_items(validator, unique, instance, schema):
    # jsonschema compares unhashable items pairwise: quadratic in the array.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[object] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError("the array has non-unique elements")
            return
        seen.add(key)


_REPLACED = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}


def json_values(value: object) -> int:
    """How many JSON values value is made of (itself included)."""
    values, stack = 0, [value]
    while stack:
        item = stack.pop()
        values += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return values


def _pattern_cost(value, instance) -> int:
    if not isinstance(instance, dict) or not isinstance(value, dict):
        return 1
    return 1 + len(value) * len(instance)


def _additional_cost(value, instance, schema) -> int:
    patterns = schema.get("patternProperties")
    if not isinstance(instance, dict) or not isinstance(patterns, dict):
        return 1
    return 1 + len(patterns) * len(instance)


def _list_cost(value) -> int:
    return 1 + len(value) if isinstance(value, list | dict) else 1


def _dependent_cost(value) -> int:
    if not isinstance(value, dict):
        return 1
    return 1 + sum(len(v) for v in value.values() if isinstance(v, list))


def _cost(name: str, value, instance, schema) -> int:
    """The steps one call of keyword `name` costs: the work it does."""
    if name in ("enum", "required"):
        return _list_cost(value)
    if name == "dependentRequired":
        return _dependent_cost(value)
    if name == "const":
        return json_values(value)
    if name == "patternProperties":
        return _pattern_cost(value, instance)
    if name == "additionalProperties":
        return _additional_cost(value, instance, schema)
    if name == "uniqueItems" and isinstance(instance, list):
        return 1 + len(instance)
    return 1


def _spend(steps: int) -> None:
    left = _steps_left.get()
    if left is not None:
        left[0] -= steps
        if left[0] < 0:
            raise SchemaTooCostly


def _counted(name: str, keyword):
    def spend_then_run(validator, value, instance, schema):
        _spend(_cost(name, value, instance, schema))
        errors = keyword(validator, value, instance, schema)
        if errors is None:
            return
        for error in errors:
            _spend(1)  # building an error (its message, its repr) is work too
            yield error

    return spend_then_run


@functools.cache
def _safe_class(base: type) -> type:
    keywords = {**base.VALIDATORS}
    keywords.update({k: f for k, f in _REPLACED.items() if k in base.VALIDATORS})
    return extend(base, {k: _counted(k, f) for k, f in keywords.items()})


def validator_class(schema: dict) -> type:
    """The dialect `$schema` names (2020-12 if none), with the keywords above."""
    return _safe_class(validator_for(schema, default=DEFAULT_VALIDATOR))


def safe_validator(schema: dict):
    return validator_class(schema)(schema, registry=NO_RETRIEVAL)


def step_budget(data: object) -> int:
    return BASE_STEPS + STEPS_PER_VALUE * json_values(data)


class Budget:
    """The steps one validation may spend; `spent` tells how many it did."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self._left = [steps]

    @property
    def spent(self) -> int:
        return self.steps - self._left[0]


def bounded_errors(
    validator, data: object, *, limit: int = MAX_ERRORS, budget: Budget | None = None
) -> list[ValidationError]:
    """The first `limit` errors of data against validator's schema, within
    step_budget(data) (or the budget given). The errors are drawn lazily:
    those past the limit are never built.

    Raises SchemaTooCostly past the budget, UnsafePattern for a pattern stored
    before the save-time check, referencing Unresolvable for a missing local ref.
    """
    budget = budget or Budget(step_budget(data))
    token = _steps_left.set(budget._left)
    try:
        return list(itertools.islice(validator.iter_errors(data), limit))
    except RecursionError as exc:  # a $ref cycle that consumes no data
        raise SchemaTooCostly from exc
    finally:
        _steps_left.reset(token)
