"""Catalogue schemas never reach out and never backtrack (issue 19, item 3)."""

from __future__ import annotations

import pytest
import referencing.exceptions

from endpoints import catalogue, schema_safety
from endpoints.models import EventType
from tests.support.api import assert_problem, row_counts
from tests.support.hostile import HostileReceiver, answer

# What a remote schema server would answer: a schema every string fails, so a
# fetched $ref would show in the publish's answer as well as in the canary.
REMOTE_SCHEMA = answer(
    "200 OK", b'{"type": "integer"}', "Content-Type: application/schema+json"
)
BACKTRACKING = "^(a+)+$"


@pytest.fixture
def canary():
    """A real HTTP server on loopback that counts every connection made to it."""
    with HostileReceiver({"schema.json": REMOTE_SCHEMA}) as server:
        yield server


def remote_refs(canary, tmp_path) -> list[str]:
    local = tmp_path / "schema.json"
    local.write_text('{"type": "integer"}')
    return [canary.url("schema.json"), local.as_uri()]


def publish(api, data, type="order.created"):
    return api.post("/events", {"merchant": "acme", "type": type, "data": data})


@pytest.mark.parametrize("which", [0, 1], ids=["http", "file"])
def test_a_remote_ref_is_refused_at_save_naming_it(platform, canary, tmp_path, which):
    ref = remote_refs(canary, tmp_path)[which]
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
    before = row_counts()
    problem = assert_problem(
        platform.post("/event-types", {"name": "order.created", "schema": schema}),
        422,
        ["body", "schema"],
    )
    assert ref in " ".join(e["msg"] for e in problem["errors"])
    assert row_counts() == before
    assert canary.connections == 0


def test_a_remote_ref_is_refused_on_change_too(platform, canary):
    assert platform.post("/event-types", {"name": "order.created"}).status_code == 201
    schema = {"allOf": [{"$ref": canary.url("schema.json")}]}
    assert_problem(
        platform.patch("/event-types/order.created", {"schema": schema}),
        422,
        ["body", "schema"],
    )
    assert EventType.objects.get(name="order.created").schema is None
    assert canary.connections == 0


def test_the_admin_refuses_a_remote_ref_beside_the_field(db, client, canary):
    from django.contrib.auth.models import User
    from django.urls import reverse

    client.force_login(User.objects.create_superuser("root", password="pw-x"))
    ref = canary.url("schema.json")
    response = client.post(
        reverse("admin:endpoints_eventtype_add"),
        {"name": "order.created", "description": "", "schema": f'{{"$ref": "{ref}"}}'},
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert ref in " ".join(errors["schema"])
    assert not EventType.objects.filter(name="order.created").exists()
    assert canary.connections == 0


def test_a_remote_ref_stored_earlier_is_never_fetched_at_publish(
    platform, merchant, canary, tmp_path
):
    for n, ref in enumerate(remote_refs(canary, tmp_path)):
        # As if saved before the save-time check existed.
        schema = {"properties": {"a": {"$ref": ref}}}
        EventType.objects.create(name=f"old.t{n}", schema=schema)
        catalogue.cache_clear()  # written behind the catalogue's back
        problem = assert_problem(publish(platform, {"a": "text"}, f"old.t{n}"), 422)
        assert "cannot be evaluated safely" in problem["errors"][0]["msg"]
    assert canary.connections == 0


@pytest.mark.parametrize("which", [0, 1], ids=["http", "file"])
def test_the_validators_registry_cannot_retrieve_anything(canary, tmp_path, which):
    """Below the save-time check: even a validator given a remote ref fetches
    nothing (jsonschema's default registry would, with a warning)."""
    ref = remote_refs(canary, tmp_path)[which]
    validator = schema_safety.safe_validator({"$ref": ref})
    with pytest.raises(referencing.exceptions.Unresolvable):
        schema_safety.bounded_errors(validator, "text")
    assert canary.connections == 0


def test_local_refs_are_accepted_and_followed(platform, merchant):
    schema = {
        "$defs": {"amount": {"type": "integer", "minimum": 0}},
        "properties": {"amount": {"$ref": "#/$defs/amount"}},
    }
    assert (
        platform.post(
            "/event-types", {"name": "order.created", "schema": schema}
        ).status_code
        == 201
    )
    assert publish(platform, {"amount": 3}).status_code == 201
    assert_problem(publish(platform, {"amount": -3}), 422, ["body", "data", "amount"])


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "#/$defs/missing"}, "points at nothing"),
        ({"$ref": "#nowhere"}, "names no $anchor"),
        ({"$ref": "#"}, "costs too much"),  # recurses without consuming data
        ({"pattern": "(a)\\1"}, "linear time"),  # a backreference
        ({"patternProperties": {"(?=x)": {}}}, "linear time"),  # lookahead
        (
            {"unevaluatedProperties": False, "patternProperties": {"^x": {}}},
            "unevaluatedProperties",
        ),
    ],
)
def test_schemas_that_cannot_run_safely_are_refused(platform, schema, words):
    problem = assert_problem(
        platform.post("/event-types", {"name": "a.b", "schema": schema}),
        422,
        ["body", "schema"],
    )
    assert words in " ".join(e["msg"] for e in problem["errors"])


@pytest.mark.timeout(30)
def test_refs_that_fan_out_exponentially_are_refused_at_save(platform):
    # Each level evaluates the next one twice: 2**40 evaluations of any value.
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)}
    defs["d40"] = {"type": "string"}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    problem = assert_problem(
        platform.post("/event-types", {"name": "a.b", "schema": schema}),
        422,
        ["body", "schema"],
    )
    assert "costs too much" in problem["errors"][0]["msg"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("value", "accepted"), [("a" * 40, True), ("a" * 40 + "!", False)]
)
def test_a_backtracking_pattern_runs_in_linear_time(
    platform, merchant, value, accepted
):
    """On Python's re, 40 a's and a "!" backtrack for days; on RE2 the answer
    is immediate, and right either way."""
    schema = {"type": "object", "properties": {"v": {"pattern": BACKTRACKING}}}
    response = platform.post(
        "/event-types", {"name": "order.created", "schema": schema}
    )
    assert response.status_code == 201, response.content
    response = publish(platform, {"v": value})
    if accepted:
        assert response.status_code == 201
    else:
        assert_problem(response, 422, ["body", "data", "v"])


@pytest.mark.timeout(30)
def test_pattern_properties_and_additional_properties_run_on_re2(platform, merchant):
    schema = {
        "patternProperties": {BACKTRACKING: {"type": "integer"}},
        "additionalProperties": False,
    }
    response = platform.post(
        "/event-types", {"name": "order.created", "schema": schema}
    )
    assert response.status_code == 201, response.content
    assert publish(platform, {"a" * 40: 1}).status_code == 201
    problem = assert_problem(publish(platform, {"a" * 40 + "!": 1}), 422)
    assert "does not match any of the regexes" in problem["errors"][0]["msg"]


@pytest.mark.timeout(30)
def test_unique_items_over_many_objects_is_linear():
    """jsonschema compares unhashable items pairwise: 20,000 distinct objects
    were 200 million comparisons."""
    validator = schema_safety.safe_validator({"type": "array", "uniqueItems": True})
    items = [{"n": n} for n in range(20_000)]
    assert schema_safety.bounded_errors(validator, items) == []
    assert len(schema_safety.bounded_errors(validator, [*items, {"n": 7}])) == 1


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([1, True], True),
        ([0, False], True),
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False),
        ([[1, 2], [2, 1]], True),
        ([None, "null"], True),
    ],
)
def test_unique_items_keeps_json_schema_equality(items, unique):
    validator = schema_safety.safe_validator({"uniqueItems": True})
    assert (schema_safety.bounded_errors(validator, items) == []) is unique


def test_a_publish_past_the_step_budget_is_refused_not_run(platform, merchant):
    """A schema stored before the save-time probe existed, costing 2**40 steps:
    the publish is refused once the budget is spent."""
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)}
    defs["d40"] = {"type": "object"}
    EventType.objects.create(
        name="order.created", schema={"$defs": defs, "$ref": "#/$defs/d0"}
    )
    problem = assert_problem(publish(platform, {"v": 1}), 422, ["body", "data"])
    assert "allowed number of steps" in problem["errors"][0]["msg"]
