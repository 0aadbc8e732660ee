"""pydantic's validation errors in plain words, and a problem's detail that
names the fields (issue 40: not "Input should be a valid dictionary").

The API passes the phrases for its own patterns (plain_message's `patterns`):
this floor knows no app's vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

ISO_8601 = "Must be a date and time in ISO 8601, e.g. 2026-01-31T12:00:00Z."


def _n(count: object, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def plain_message(error: Mapping, *, patterns: Mapping[str, str] = {}) -> str:
    """One pydantic error (a dict of ValidationError.errors()) in plain words."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    msg = str(error.get("msg", ""))
    if kind == "missing":
        return "Required."
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return "Must be a JSON object."
    if kind in {"list_type", "tuple_type", "set_type"}:
        return "Must be a JSON array."
    if kind in {"string_type", "string_sub_type"}:
        return "Must be a string."
    if kind in {"int_type", "int_parsing", "int_from_float"}:
        return "Must be a whole number."
    if kind in {"float_type", "float_parsing", "finite_number"}:
        return "Must be a number."
    if kind in {"bool_type", "bool_parsing"}:
        return "Must be true or false."
    if kind in {"datetime_type", "datetime_parsing", "datetime_from_date_parsing"}:
        return ISO_8601
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        if least == 1:
            return "Must not be empty."
        return f"Must be at least {_n(least, 'character', 'characters')}."
    if kind == "string_too_long":
        return (
            f"Must be at most {_n(ctx.get('max_length'), 'character', 'characters')}."
        )
    if kind == "too_short":
        return f"Must hold at least {_n(ctx.get('min_length'), 'item', 'items')}."
    if kind == "too_long":
        return f"Must hold at most {_n(ctx.get('max_length'), 'item', 'items')}."
    if kind == "greater_than_equal":
        return f"Must be at least {ctx.get('ge')}."
    if kind == "greater_than":
        return f"Must be more than {ctx.get('gt')}."
    if kind == "less_than_equal":
        return f"Must be at most {ctx.get('le')}."
    if kind == "less_than":
        return f"Must be less than {ctx.get('lt')}."
    if kind == "string_pattern_mismatch":
        return patterns.get(
            str(ctx.get("pattern", "")), "Has characters that are not allowed here."
        )
    if kind in {"enum", "literal_error"}:
        return f"Must be one of {ctx.get('expected', 'the documented values')}."
    if kind == "extra_forbidden":
        return "Not a field of this request."
    if kind == "json_invalid":
        return "Not valid JSON."
    # Our own validators' messages are already words; pydantic prefixes them.
    return msg.removeprefix("Value error, ")


def location_text(loc: Sequence[str | int]) -> str:
    """["body", "events", 0, "type"] -> "body.events[0].type"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text


def fields_detail(errors: Sequence[Mapping]) -> str:
    """A 422's detail: the first field and its reason, and how many more."""
    if not errors:
        return "The request has invalid fields."
    first = errors[0]
    msg = str(first["msg"])
    if len(msg) > 1 and msg[0].isupper() and msg[1].islower():
        msg = msg[0].lower() + msg[1:]
    where = location_text(first["loc"])
    detail = f"{where}: {msg}" if where else msg
    if len(errors) > 1:
        more = len(errors) - 1
        detail += f" (and {_n(more, 'more error', 'more errors')}; see errors)"
    return detail
