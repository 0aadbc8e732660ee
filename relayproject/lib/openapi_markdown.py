"""The REST API reference page, rendered from the OpenAPI document.

The docs build (docs/hooks.py) passes the document the server itself serves
(`relayproject.api.api.get_openapi_schema()`), so the page lists exactly the
operations, parameters, fields and answers the code has. Pure: a dict in,
Markdown out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

METHODS = ("get", "post", "put", "patch", "delete")
REF = "#/components/schemas/"
# Keywords shown beside a field's description, in this order.
CONSTRAINTS = (
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minimum", "at least {}"),
    ("exclusiveMinimum", "above {}"),
    ("maximum", "at most {}"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "matches `{}`"),
)


def operation_heading(method: str, path: str) -> str:
    return f"{method.upper()} {path}"


def operations(document: dict) -> list[tuple[str, str, dict]]:
    """(method, path, operation) for every operation, in the document's order."""
    return [
        (method, path, item[method])
        for path, item in document.get("paths", {}).items()
        for method in METHODS
        if method in item
    ]


def schema_anchor(name: str) -> str:
    # What MkDocs' table of contents makes of a heading that is the bare name.
    return re.sub(r"[^\w-]", "", name.lower())


def type_words(schema: dict) -> str:
    """A field's type in a few words, with links to the named schemas."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(REF)
        return f"[`{name}`](#{schema_anchor(name)})"
    if "anyOf" in schema:
        return " or ".join(type_words(option) for option in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {type_words(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {type_words(schema['additionalProperties'])}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


def notes(schema: dict) -> str:
    """Description, default and constraints of a field, as one cell."""
    parts = []
    for option in [schema, *schema.get("anyOf", [])]:
        if option.get("description"):
            parts.append(option["description"].strip())
        for keyword, words in CONSTRAINTS:
            if keyword in option:
                parts.append(words.format(option[keyword]))
        if isinstance(option.get("items"), dict):
            for keyword, words in CONSTRAINTS:
                if keyword in option["items"]:
                    parts.append("each " + words.format(option["items"][keyword]))
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return _cell("; ".join(dict.fromkeys(parts)))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: Iterable[str], rows: list[list[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _body_words(content: dict) -> str:
    kinds = []
    for media_type, spec in content.items():
        kinds.append(f"{type_words(spec.get('schema', {}))} (`{media_type}`)")
    return ", ".join(kinds) or "none"


def operation_markdown(method: str, path: str, operation: dict) -> list[str]:
    lines = [f"### {operation_heading(method, path)}", ""]
    summary = operation.get("summary", "")
    lines += [f"*{summary}*", ""] if summary else []
    if operation.get("description"):
        lines += [operation["description"].strip(), ""]
    if operation.get("security"):
        lines += ["Needs an API key: `Authorization: Bearer <key>`.", ""]
    parameters = operation.get("parameters", [])
    if parameters:
        rows = [
            [
                f"`{p['name']}`",
                p["in"],
                type_words(p.get("schema", {})),
                "yes" if p.get("required") else "no",
                notes(p.get("schema", {})),
            ]
            for p in parameters
        ]
        lines += _table(["parameter", "in", "type", "required", "notes"], rows)
    body = operation.get("requestBody")
    if body:
        required = " (required)" if body.get("required") else ""
        lines += [f"Body{required}: {_body_words(body.get('content', {}))}", ""]
    responses = operation.get("responses", {})
    rows = [
        [
            f"{status}",
            _cell(answer.get("description", "")),
            _body_words(answer.get("content", {})),
        ]
        for status, answer in sorted(responses.items(), key=lambda item: str(item[0]))
    ]
    lines += _table(["status", "meaning", "body"], rows)
    return lines


def schema_markdown(name: str, schema: dict) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"].strip(), ""]
    properties = schema.get("properties")
    if not properties:
        return [*lines, f"Type: {type_words(schema)}", ""]
    required = set(schema.get("required", []))
    rows = [
        [
            f"`{field}`",
            type_words(spec),
            "yes" if field in required else "no",
            notes(spec),
        ]
        for field, spec in properties.items()
    ]
    return lines + _table(["field", "type", "required", "notes"], rows)


def openapi_markdown(document: dict) -> str:
    """The whole reference page: operations grouped by tag, then the schemas."""
    info = document.get("info", {})
    lines = [
        "# REST API reference",
        "",
        "This page is generated, when the docs are built, from the OpenAPI "
        "document the server serves at `/api/v1/openapi.json` (the interactive "
        "docs are at `/api/v1/docs`), so it lists exactly what the code does. "
        "How to use it (auth, errors, pagination, idempotency): "
        "[the API guide](../api/guide.md).",
        "",
        f"{info.get('description', '').strip()} (API version {info.get('version', '?')}.)",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    for method, path, operation in operations(document):
        tag = (operation.get("tags") or ["other"])[0]
        by_tag.setdefault(tag, []).append((method, path, operation))
    for tag, grouped in by_tag.items():
        lines += [f"## {tag[:1].upper()}{tag[1:]}", ""]
        for method, path, operation in grouped:
            lines += operation_markdown(method, path, operation)
    lines += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += schema_markdown(name, schema)
    return "\n".join(lines).rstrip() + "\n"
