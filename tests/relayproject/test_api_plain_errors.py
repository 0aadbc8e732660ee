"""422s in plain words, naming the field in `detail`; a trailing slash is a
404 that names the path without it; problem types are RFC 9457's about:blank."""

from __future__ import annotations

import pytest

from tests.support.api import Api, assert_problem

pytestmark = pytest.mark.django_db

PYDANTIC_WORDS = ("Input should", "String should", "Field required", "Value error")


@pytest.mark.parametrize(
    ("body", "loc", "msg"),
    [
        (
            {"merchant": "acme", "type": "order paid!", "data": {}},
            ["body", "type"],
            "Must be dot-separated words of letters, digits, '_' or '-', "
            "e.g. order.paid.",
        ),
        (
            {"merchant": "acme", "type": "order.paid", "data": "1999"},
            ["body", "data"],
            "Must be a JSON object.",
        ),
        ({"merchant": "acme", "data": {}}, ["body", "type"], "Required."),
    ],
)
def test_a_422_says_in_words_which_field_is_wrong(platform, merchant, body, loc, msg):
    problem = assert_problem(platform.post("/events", body), 422, loc)
    assert {"loc": loc, "msg": msg} in problem["errors"]
    where = ".".join(loc)
    assert problem["detail"] == f"{where}: {msg[0].lower()}{msg[1:]}"
    assert not any(word in problem["detail"] for word in PYDANTIC_WORDS)


def test_a_bad_merchant_slug_is_explained_not_shown_as_a_pattern(platform):
    problem = assert_problem(
        platform.post("/merchants", {"slug": "acme payments", "name": "Acme"}), 422
    )
    assert problem["errors"] == [
        {"loc": ["body", "slug"], "msg": "May hold only letters, digits, '-' and '_'."}
    ]
    assert "^" not in problem["detail"]


def test_several_bad_fields_are_counted_in_the_detail(platform, merchant):
    problem = assert_problem(
        platform.post("/events", {"merchant": "acme", "type": "", "data": []}), 422
    )
    assert len(problem["errors"]) == 2
    assert problem["detail"].endswith("(and 1 more error; see errors)")


def test_a_trailing_slash_is_a_404_that_names_the_path_without_it(platform, merchant):
    problem = assert_problem(platform.get("/merchants/acme/"), 404)
    assert problem["detail"] == (
        "No such path; API paths have no trailing slash: /api/v1/merchants/acme"
    )


def test_a_path_that_exists_nowhere_is_a_plain_404(platform):
    problem = assert_problem(platform.get("/no-such-thing/"), 404)
    assert problem["detail"] == "Not Found"


def test_problem_types_are_about_blank():
    problem = assert_problem(Api(None).get("/merchants/acme"), 401)
    assert problem["type"] == "about:blank"
    assert problem["title"] == "Unauthorized"


def test_data_refused_by_its_schema_is_named_in_the_detail(platform, merchant):
    schema = {
        "type": "object",
        "properties": {"order": {"properties": {"id": {"type": "integer"}}}},
    }
    created = platform.post("/event-types", {"name": "order.paid", "schema": schema})
    assert created.status_code == 201, created.content
    problem = assert_problem(
        platform.post(
            "/events",
            {"merchant": "acme", "type": "order.paid", "data": {"order": {"id": "x"}}},
        ),
        422,
    )
    assert problem["detail"].startswith("body.data.order.id: ")
