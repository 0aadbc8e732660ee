"""How deep a JSON value nests, measured without recursion.

Deep JSON is cheap to send and costly to hold: Python's json, psycopg's
jsonb loader, pydantic and the admin's templates all recurse, so a few
hundred levels end in a RecursionError (a 500) wherever the event is loaded
or shown. Events are refused at ingest beyond MAX_EVENT_DEPTH.
"""

from __future__ import annotations


def json_depth(value: object, *, stop_above: int | None = None) -> int:
    """Containers nested in value: {} is 1, {"a": []} is 2, a scalar 0.

    With stop_above, the walk ends as soon as the depth passes it (the answer is
    then stop_above + 1), so a hostile value costs no more than needed.
    """
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if stop_above is not None and deepest > stop_above:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest
