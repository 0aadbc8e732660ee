"""What a catalogue schema must not contain, found when it is saved.

Read with endpoints/schema_safety.py, which evaluates the schemas these
checks let through: remote `$ref`s, patterns RE2 cannot run, `$ref`s that
recurse or fan out without end, and keyword lists so long that each check of
them is expensive (caps below) are refused with a message naming the part.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

import referencing.exceptions

from endpoints.schema_safety import (
    DATA_KEYWORDS,
    REF_KEYWORDS,
    SchemaTooCostly,
    UnsafePattern,
    bounded_errors,
    compiled,
    json_values,
    safe_validator,
)

# Save-time caps on what one keyword may list: each check of it costs that
# many steps (schema_safety charges the work), so a long list would spend a
# publish's budget on a handful of values.
MAX_KEYWORD_ITEMS = 1_000  # enum, required, dependentRequired (all lists)
MAX_CONST_VALUES = 1_000  # JSON values in one const
MAX_PATTERN_PROPERTIES = 100  # patterns in one patternProperties
SIZED_KEYWORDS = frozenset({"enum", "const", "required", "dependentRequired"})


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
            refusals.extend(_size_refusals(keyword, value, where))
            refusals.extend(_pattern_refusals(list(value), where))
        else:
            refusals.extend(_size_refusals(keyword, value, where))
    return refusals[:10]


def _size_refusals(keyword: str, value: object, where: list) -> list[str]:
    """Each call of these keywords costs their size: caps keep one call cheap."""
    if keyword == "const":
        size, cap, unit = json_values(value), MAX_CONST_VALUES, "JSON values"
    elif keyword == "patternProperties":
        size, cap, unit = len(value), MAX_PATTERN_PROPERTIES, "patterns"
    elif keyword == "dependentRequired" and isinstance(value, dict):
        size = sum(len(v) for v in value.values() if isinstance(v, list))
        cap, unit = MAX_KEYWORD_ITEMS, "names in all"
    elif isinstance(value, list):
        size, cap, unit = len(value), MAX_KEYWORD_ITEMS, "items"
    else:
        return []
    if size <= cap:
        return []
    return [
        f"{keyword} at {_place(where)} has {size} {unit}; at most {cap} are "
        "accepted (each check of it costs that many steps)."
    ]


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
        if key in SIZED_KEYWORDS:
            yield where, key, value
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
