"""Does the client cover the server's OpenAPI document? Every operation must
be the request some Client method makes, that method must fill each path,
query and header parameter and send each body field from its own arguments,
and the dataclass it answers with must hold the answer's fields exactly.

Each public Client method is called once with a marker for every argument
(``m-<name>``) through a transport that records the request and sends
nothing; the markers found in the request say which argument went where.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, fields
from urllib.parse import parse_qs, urlsplit

from webhook_relay_client import Client, models

MARK = "m-"
API_PREFIX = "/api/v1"
# Set by the client from the answer's headers, not read from its body.
CLIENT_ONLY_FIELDS = {"Event": {"replayed"}}


@dataclass(frozen=True)
class Sent:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: object


class _Recorded(Exception):
    def __init__(self, sent: Sent) -> None:
        self.sent = sent


def _recording_transport(method, url, headers, body, timeout):
    parts = urlsplit(url)
    raise _Recorded(
        Sent(
            method=method,
            path=parts.path.removeprefix(API_PREFIX),
            query=parse_qs(parts.query),
            headers=dict(headers),
            body=json.loads(body) if body else None,
        )
    )


def _marker(parameter: inspect.Parameter) -> object:
    # Iterables of events are iterated (each copied as a dict); the rest is
    # sent as given, so a string marker shows where it went.
    if "Iterable[" in str(parameter.annotation):
        return [{MARK + parameter.name: True}]
    return MARK + parameter.name


def client_requests(client_class=Client) -> dict[str, Sent | None]:
    """The request each public method makes (None: it made none)."""
    client = client_class("http://relay.invalid", "key", transport=_recording_transport)
    made = {}
    for name, method in inspect.getmembers(client, inspect.ismethod):
        if name.startswith("_"):
            continue
        params = inspect.signature(method).parameters.values()
        args = {p.name: _marker(p) for p in params}
        made[name] = None
        try:
            result = method(**args)
            iter(result).__next__()  # a Paginator asks on its first item
        except _Recorded as recorded:
            made[name] = recorded.sent
        except (TypeError, StopIteration):
            pass
    return made


def _template(path: str) -> re.Pattern:
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path))
    return re.compile(pattern + r"\Z")


def _resolve(document: dict, schema: dict | None) -> dict:
    schema = schema or {}
    for option in schema.get("anyOf", ()):
        if "$ref" in option:
            schema = option
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return document["components"]["schemas"][name]
    return schema


def _answer_schema(document: dict, operation: dict) -> dict | None:
    for status, answer in sorted(operation["responses"].items()):
        if status.startswith("2") and status != "204":
            content = answer.get("content", {}).get("application/json", {})
            schema = _resolve(document, content.get("schema"))
            # A page, or the batch's {"items"}: the answer is its items'.
            if "items" in schema.get("properties", {}) and set(
                schema["properties"]
            ) <= {"items", "next_cursor"}:
                schema = _resolve(document, schema["properties"]["items"]["items"])
            return schema
    return None


def _answer_class(client_class, method_name: str):
    annotation = inspect.signature(getattr(client_class, method_name)).return_annotation
    match = re.fullmatch(r"(?:Paginator|list)\[(\w+)\]|(\w+)", str(annotation))
    name = match and (match.group(1) or match.group(2))
    return getattr(models, name, None) if name else None


def coverage_problems(document: dict, client_class=Client) -> list[str]:
    """What the client misses of the document; [] when it covers it all."""
    made = client_requests(client_class)
    problems = [f"{name}() makes no request" for name, sent in made.items() if not sent]
    for path, operations in document["paths"].items():
        local = path.removeprefix(API_PREFIX)
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            matches = [
                (name, sent, m)
                for name, sent in made.items()
                if sent
                and sent.method == method.upper()
                and (m := _template(local).match(sent.path))
            ]
            if not matches:
                problems.append(f"{where}: no Client method makes this request")
                continue
            for name, sent, match in matches:
                problems += _parameter_problems(
                    document, operation, where, name, sent, match
                )
                problems += _answer_problems(
                    document, operation, where, name, client_class
                )
    return problems


def _parameter_problems(document, operation, where, name, sent, match) -> list[str]:
    problems = []
    for parameter in operation.get("parameters", ()):
        param, place = parameter["name"], parameter["in"]
        if place == "path":
            value = match.group(param)
        elif place == "query":
            value = (sent.query.get(param) or [""])[0]
        else:
            value = {k.lower(): v for k, v in sent.headers.items()}.get(
                param.lower(), ""
            )
        if not value.startswith(MARK):
            problems.append(
                f"{where}: {name}() does not send {place} parameter {param!r}"
            )
    body = _resolve(
        document,
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema"),
    )
    sent_fields = set(sent.body) if isinstance(sent.body, dict) else set()
    for field in body.get("properties", {}):
        if field not in sent_fields:
            problems.append(f"{where}: {name}() does not send body field {field!r}")
    return problems


def _answer_problems(document, operation, where, name, client_class) -> list[str]:
    schema = _answer_schema(document, operation)
    if schema is None:
        return []
    answer_class = _answer_class(client_class, name)
    if answer_class is None:
        return [f"{where}: {name}() answers with no dataclass of models"]
    held = {f.name for f in fields(answer_class)} - CLIENT_ONLY_FIELDS.get(
        answer_class.__name__, set()
    )
    documented = set(schema.get("properties", {}))
    problems = [
        f"{where}: {answer_class.__name__} lacks the answer's field {f!r}"
        for f in sorted(documented - held)
    ]
    problems += [
        f"{where}: {answer_class.__name__} has {f!r}, which the answer does not"
        for f in sorted(held - documented)
    ]
    return problems


def operations_made(document: dict, sent: list[tuple[str, str]]) -> set[str]:
    """The document's operations ("METHOD /path") among requests (method, path)."""
    made = set()
    for path, operations in document["paths"].items():
        pattern = _template(path)
        for method in operations:
            if any(m == method.upper() and pattern.match(p) for m, p in sent):
                made.add(f"{method.upper()} {path}")
    return made


def all_operations(document: dict) -> set[str]:
    return {
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
    }
