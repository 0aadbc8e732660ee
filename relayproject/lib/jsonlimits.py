"""How deep a JSON value nests, measured without recursion.

Deep JSON is cheap to send and costly to hold: Python's json, psycopg's
jsonb loader, pydantic and the admin's templates all recurse, so a few
hundred levels end in a RecursionError (a 500) wherever the event is loaded
or shown. Events are refused at ingest beyond MAX_EVENT_DEPTH
(deliveries/publish/validation.py, with `json_problems`).
"""

from __future__ import annotations

import re


def json_depth(value: object, *, stop_above: int | None = None) -> int:
    """Containers nested in value: {} is 1, {"a": []} is 2, a scalar 0.

    With stop_above, the walk ends as soon as the depth passes it (the answer is
    then stop_above + 1), so a hostile value costs no more than needed.
    """
    # Level by level: each pass takes the containers of one depth and lists
    # their children (list.extend: no tuple per value, as a stack needs).
    depth = 0
    level = [value]
    while level:
        below: list = []
        found = False
        for item in level:
            if isinstance(item, dict):
                below.extend(item.values())
                found = True
            elif isinstance(item, list):
                below.extend(item)
                found = True
        if not found:
            break
        depth += 1
        if stop_above is not None and depth > stop_above:
            break
        level = below
    return depth


# NUL, and any UTF-16 surrogate: a str holds one only when it is unpaired (a
# pair decodes to a single character). PostgreSQL text and jsonb cannot hold
# U+0000, and UTF-8 (so no database) cannot encode a lone surrogate.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

# (where in the value, what is wrong); where is a list of keys and indexes.
Problem = tuple[list, str]


def depth_message(limit: int) -> str:
    return f"Nests deeper than MAX_EVENT_DEPTH ({limit})."


def json_problems(value: object, *, max_depth: int) -> list[Problem]:
    """What keeps value from being stored as an event's data: nesting past
    max_depth, or a string (key or value) with NUL or a lone surrogate.

    Walks without recursion and stops at the first problem, so a hostile
    value costs at most one pass over what it holds.
    """
    stack: list[tuple[object, int, list]] = [(value, 1, [])]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            if UNSTORABLE.search(item):
                return [(where, _unstorable_message(item))]
            continue
        if isinstance(item, dict):
            pairs = item.items()
        elif isinstance(item, list):
            pairs = enumerate(item)
        else:
            continue
        if depth > max_depth:
            return [([], depth_message(max_depth))]
        for key, child in pairs:
            if isinstance(key, str) and UNSTORABLE.search(key):
                return [([*where, key], _unstorable_message(key))]
            stack.append((child, depth + 1, [*where, key]))
    return []


def _unstorable_message(text: str) -> str:
    if "\x00" in text:
        return "Contains the NUL character (U+0000), which cannot be stored."
    return "Contains a lone surrogate (U+D800 to U+DFFF), which is not UTF-8."
