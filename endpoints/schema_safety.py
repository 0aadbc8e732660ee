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
  validation may evaluate at most `step_budget(data)` keywords, so `$ref`
  chains that fan out exponentially end in a refusal, not a stuck worker.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator
from urllib.parse import unquote

import re2
import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend, validator_for

# One validation may evaluate this many keywords, plus STEPS_PER_VALUE for
# each JSON value in the data: a realistic schema spends a handful per value.
BASE_STEPS = 10_000
STEPS_PER_VALUE = 50
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


def _counted(keyword):
    def spend_then_run(validator, value, instance, schema):
        left = _steps_left.get()
        if left is not None:
            left[0] -= 1
            if left[0] < 0:
                raise SchemaTooCostly
        return keyword(validator, value, instance, schema)

    return spend_then_run


@functools.cache
def _safe_class(base: type) -> type:
    keywords = {**base.VALIDATORS}
    keywords.update({k: f for k, f in _REPLACED.items() if k in base.VALIDATORS})
    return extend(base, {k: _counted(f) for k, f in keywords.items()})


def validator_class(schema: dict) -> type:
    """The dialect `$schema` names (2020-12 if none), with the keywords above."""
    return _safe_class(validator_for(schema, default=DEFAULT_VALIDATOR))


def safe_validator(schema: dict):
    return validator_class(schema)(schema, registry=NO_RETRIEVAL)


def step_budget(data: object) -> int:
    values, stack = 0, [data]
    while stack:
        value = stack.pop()
        values += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return BASE_STEPS + STEPS_PER_VALUE * values


def bounded_errors(validator, data: object) -> list[ValidationError]:
    """Every error of data against validator's schema, within step_budget(data).

    Raises SchemaTooCostly past the budget, UnsafePattern for a pattern stored
    before the save-time check, referencing Unresolvable for a missing local ref.
    """
    token = _steps_left.set([step_budget(data)])
    try:
        return list(validator.iter_errors(data))
    except RecursionError as exc:  # a $ref cycle that consumes no data
        raise SchemaTooCostly from exc
    finally:
        _steps_left.reset(token)


# --- save time -------------------------------------------------------------


def static_refusals(schema: dict) -> list[str]:
    """The refusals found by reading schema, without evaluating it."""
    if "$schema" in schema and not isinstance(schema["$schema"], str):
        return ["$schema must be a string naming a JSON Schema dialect."]
    refusals = []
    if _has_keyword(schema, "unevaluatedProperties") and _has_keyword(
        schema, "patternProperties"
    ):
        # jsonschema evaluates those patterns itself, with backtracking.
        refusals.append(
            "unevaluatedProperties cannot be combined with patternProperties; "
            "use additionalProperties instead."
        )
    for where, keyword, value in _walk(schema, schema, []):
        if keyword in REF_KEYWORDS:
            refusals.extend(_ref_refusals(keyword, value, where, schema))
        elif keyword == "pattern":
            refusals.extend(_pattern_refusals([value], where))
        elif keyword == "patternProperties":
            refusals.extend(_pattern_refusals(list(value), where))
    return refusals[:10]


def _walk(node: object, resource: dict, where: list) -> Iterator[tuple]:
    """(path, keyword, value) of every ref and pattern keyword, with the
    nearest enclosing resource (`$id`) for resolving `#/...` pointers."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, resource, [*where, i])
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("$id"), str):
        resource = node
    for key, value in node.items():
        if key in DATA_KEYWORDS:
            continue
        if (key in REF_KEYWORDS or key == "pattern") and isinstance(value, str):
            yield where, key, (value, resource) if key != "pattern" else value
        elif key == "patternProperties" and isinstance(value, dict):
            yield where, key, value
        yield from _walk(value, resource, [*where, key])


def _place(where: list) -> str:
    return "/".join(str(p) for p in where) or "(the root)"


def _ref_refusals(keyword: str, value: tuple, where: list, root: dict) -> list[str]:
    ref, resource = value
    if not ref.startswith("#"):
        return [
            f"{keyword} {ref!r} at {_place(where)} is not local: only references "
            "inside this schema (starting with #) are accepted."
        ]
    if ref.startswith("#/") and not _pointer_resolves(ref[1:], resource):
        return [f"{keyword} {ref!r} at {_place(where)} points at nothing."]
    if ref[1:] and not ref.startswith("#/") and not _has_anchor(root, ref[1:]):
        return [f"{keyword} {ref!r} at {_place(where)} names no $anchor."]
    return []


def _pointer_resolves(pointer: str, resource: dict) -> bool:
    node: object = resource
    for token in pointer.split("/")[1:]:
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def _has_keyword(node: object, keyword: str) -> bool:
    if isinstance(node, list):
        return any(_has_keyword(item, keyword) for item in node)
    if not isinstance(node, dict):
        return False
    return any(
        k == keyword or _has_keyword(v, keyword)
        for k, v in node.items()
        if k not in DATA_KEYWORDS
    )


def _has_anchor(node: object, name: str) -> bool:
    if isinstance(node, list):
        return any(_has_anchor(item, name) for item in node)
    if not isinstance(node, dict):
        return False
    if name in (node.get("$anchor"), node.get("$dynamicAnchor")):
        return True
    return any(_has_anchor(v, name) for k, v in node.items() if k not in DATA_KEYWORDS)


def _pattern_refusals(patterns: list, where: list) -> list[str]:
    refusals = []
    for pattern in patterns:
        try:
            compiled(pattern)
        except UnsafePattern:
            refusals.append(
                f"pattern {pattern[:100]!r} at {_place(where)} cannot run in "
                "linear time (RE2 syntax: no backreferences or lookaround)."
            )
    return refusals


def probe_refusals(schema: dict) -> list[str]:
    """Schemas whose keywords apply whatever the data (allOf over $refs) can
    cost exponential time or recurse for ever: try them on trivial values."""
    validator = safe_validator(schema)
    for probe in (None, {}, [], "", 0):
        try:
            bounded_errors(validator, probe)
        except SchemaTooCostly:
            return [
                "The schema costs too much to evaluate, even for an empty value "
                "(its $refs recurse or fan out without end)."
            ]
        except referencing.exceptions.Unresolvable as exc:
            return [f"A $ref cannot be resolved: {str(exc)[:200]}"]
    return []
