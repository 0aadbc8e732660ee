"""A publish against any accepted schema costs bounded time (issue 19, item 3):
steps are charged for the work a keyword does, only the errors shown are
built, and the lists that make one call expensive are capped at save time."""

from __future__ import annotations

import pytest

from endpoints import schema_safety
from endpoints.models import EventType
from tests.support.api import assert_problem, row_counts

MANY_REQUIRED = [f"k{i:06d}" for i in range(20_000)]
MANY_PATTERNS = {f"^p{i:05d}$": {} for i in range(2_000)}


def publish(api, data, type="order.created"):
    return api.post("/events", {"merchant": "acme", "type": type, "data": data})


def spend(schema: dict, data: object) -> tuple[object, schema_safety.Budget]:
    """(the errors, or SchemaTooCostly) and the budget, with what it spent."""
    budget = schema_safety.Budget(schema_safety.step_budget(data))
    validator = schema_safety.safe_validator(schema)
    try:
        return schema_safety.bounded_errors(validator, data, budget=budget), budget
    except schema_safety.SchemaTooCostly as exc:
        return exc, budget


COSTLY = {
    "required": (
        {"properties": {"a": {"items": {"required": MANY_REQUIRED}}}},
        {"a": [{}] * 40},
    ),
    "dependentRequired": (
        {"items": {"dependentRequired": {"a": MANY_REQUIRED}}},
        [{"a": 1}] * 40,
    ),
    "patternProperties": (
        {"patternProperties": MANY_PATTERNS, "additionalProperties": False},
        {f"key{i:05d}-padding-padding": i for i in range(1_000)},
    ),
    "enum": (
        {"properties": {"tags": {"items": {"enum": list(range(250))}}}},
        {"tags": [249] * 130_000},
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyword", list(COSTLY))
def test_keywords_are_charged_for_their_work_not_their_calls(keyword):
    """Each call of these once cost one step however long its list: 20,000
    required names on 40 items was 800,000 errors inside a 12,100-step budget."""
    schema, data = COSTLY[keyword]
    outcome, budget = spend(schema, data)
    assert isinstance(outcome, schema_safety.SchemaTooCostly)
    assert budget.spent > budget.steps


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "items",
    [{"type": "string"}, {"enum": [f"v{i}" for i in range(250)]}],
    ids=["type", "enum"],
)
def test_only_the_errors_shown_are_built(items):
    """130,000 integers that all fail: five errors are drawn, then it stops."""
    schema = {"properties": {"tags": {"type": "array", "items": items}}}
    errors, budget = spend(schema, {"tags": [1] * 130_000})
    assert len(errors) == schema_safety.MAX_ERRORS
    # Five items evaluated (each at most 1 + 250 for the enum, 1 per error
    # per level), not 130,000.
    assert budget.spent < 10 * 260


def test_a_const_costs_its_size():
    const = list(range(500))
    outcome, budget = spend({"items": {"const": const}}, [const] * 100)
    assert outcome == []
    assert budget.spent >= 100 * 501


@pytest.mark.timeout(60)
def test_a_publish_of_many_failing_items_answers_five_problems(platform, merchant):
    schema = {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    response = platform.post(
        "/event-types", {"name": "order.created", "schema": schema}
    )
    assert response.status_code == 201, response.content
    before = row_counts()
    problem = assert_problem(publish(platform, {"tags": [1] * 85_000}), 422)
    assert [e["loc"] for e in problem["errors"]] == [
        ["body", "data", "tags", i] for i in range(5)
    ]
    assert row_counts() == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"items": {"required": MANY_REQUIRED}}, "required at items has 20000"),
        ({"dependentRequired": {"a": MANY_REQUIRED}}, "dependentRequired at"),
        ({"enum": list(range(1_001))}, "enum at (the root) has 1001 items"),
        ({"const": list(range(1_000))}, "const at (the root) has 1001 JSON values"),
        ({"patternProperties": MANY_PATTERNS}, "patternProperties at (the root)"),
    ],
    ids=["required", "dependentRequired", "enum", "const", "patternProperties"],
)
def test_keyword_lists_past_their_cap_are_refused_at_save(platform, schema, words):
    before = row_counts()
    problem = assert_problem(
        platform.post("/event-types", {"name": "order.created", "schema": schema}),
        422,
        ["body", "schema"],
    )
    assert words in " ".join(e["msg"] for e in problem["errors"])
    assert row_counts() == before


@pytest.mark.timeout(60)
def test_a_costly_schema_stored_earlier_is_refused_at_publish(platform, merchant):
    # As if saved before the caps existed.
    EventType.objects.create(
        name="order.created",
        schema={"properties": {"a": {"items": {"required": MANY_REQUIRED}}}},
    )
    problem = assert_problem(publish(platform, {"a": [{}] * 40}), 422)
    assert "cannot be evaluated safely" in problem["errors"][0]["msg"]
    assert "required" in problem["errors"][0]["msg"]


def test_lists_within_the_caps_are_accepted_and_checked(platform, merchant):
    schema = {
        "properties": {"tag": {"enum": list(range(1_000))}},
        "required": ["tag"],
    }
    response = platform.post(
        "/event-types", {"name": "order.created", "schema": schema}
    )
    assert response.status_code == 201, response.content
    assert publish(platform, {"tag": 999}).status_code == 201
    assert_problem(publish(platform, {"tag": 1_000}), 422, ["body", "data", "tag"])
