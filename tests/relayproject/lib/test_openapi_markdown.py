"""The docs' REST API reference follows the OpenAPI document the server serves:
every operation and schema is on the page, and what the document gains, the
page shows."""

from __future__ import annotations

import copy

import pytest

from relayproject.api import api
from relayproject.lib.openapi_markdown import (
    openapi_markdown,
    operation_heading,
    operations,
    schema_anchor,
    type_words,
)


@pytest.fixture(scope="module")
def document() -> dict:
    return api.get_openapi_schema()


def headings(page: str) -> list[str]:
    return [
        line.lstrip("#").strip() for line in page.splitlines() if line.startswith("#")
    ]


def test_every_operation_and_schema_of_the_served_document_has_its_heading(document):
    found = headings(openapi_markdown(document))
    wanted = [
        operation_heading(method, path) for method, path, _ in operations(document)
    ]
    assert len(wanted) > 25, "the document's operations were read"
    assert [h for h in wanted if h not in found] == []
    assert [s for s in document["components"]["schemas"] if s not in found] == []


def test_an_operation_added_to_the_document_is_on_the_page(document):
    grown = copy.deepcopy(document)
    grown["paths"]["/api/v1/replays"] = {
        "post": {
            "summary": "Replay Create",
            "tags": ["events and deliveries"],
            "parameters": [
                {"in": "query", "name": "dry_run", "schema": {"type": "boolean"}}
            ],
            "responses": {"202": {"description": "Accepted"}},
        }
    }
    page = openapi_markdown(grown)
    assert "### POST /api/v1/replays" in page
    assert "| `dry_run` | query | boolean | no |" in page


def test_a_field_added_to_a_schema_is_on_the_page(document):
    grown = copy.deepcopy(document)
    grown["components"]["schemas"]["EventIn"]["properties"]["delay_seconds"] = {
        "type": "integer",
        "maximum": 3600,
        "description": "Send no sooner than this.",
    }
    page = openapi_markdown(grown)
    assert (
        "| `delay_seconds` | integer | no | Send no sooner than this.; at most 3600 |"
        in page
    )


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "#/components/schemas/EventIn"}, "[`EventIn`](#eventin)"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "integer or null"),
        ({"enum": ["owner", "viewer"]}, '`"owner"` \\| `"viewer"`'),
        ({"type": "array", "items": {"type": "string"}}, "array of string"),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            "object of string",
        ),
        ({"type": "string", "format": "date-time"}, "string (date-time)"),
        ({}, "any"),
    ],
)
def test_type_words(schema, words):
    assert type_words(schema) == words


def test_schema_links_point_at_the_schema_headings(document):
    page = openapi_markdown(document)
    for name in document["components"]["schemas"]:
        assert f"### {name}" in page
        assert schema_anchor(name) == name.lower()
