"""Cursor lists: every item across pages, one request per page, lazily."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from webhook_relay_client import ApiError, Client

TYPE = {
    "description": "",
    "schema": None,
    "example": None,
    "deprecated": False,
    "created_at": "2025-03-01T12:00:00.000Z",
    "updated_at": "2025-03-01T12:00:00.000Z",
}


def page(names, next_cursor):
    return {"items": [{"name": n, **TYPE} for n in names], "next_cursor": next_cursor}


def queries(stub) -> list[dict]:
    return [parse_qs(urlsplit(s.path).query) for s in stub.sent]


def test_iterating_walks_every_page_passing_each_cursor_back(stub):
    stub.answer(200, page(["a", "b"], "c1")).answer(200, page(["c"], "c2"))
    stub.answer(200, page(["d"], None))
    found = [t.name for t in Client(stub.url, "k").list_event_types()]
    assert found == ["a", "b", "c", "d"]
    assert queries(stub) == [{}, {"cursor": ["c1"]}, {"cursor": ["c2"]}]


def test_nothing_is_asked_until_iterated_and_pages_can_be_resumed(stub):
    stub.answer(200, {"items": [], "next_cursor": None})
    listed = Client(stub.url, "k").list_deliveries(
        status="dead", merchant="acme", cursor="c9", limit=20
    )
    assert stub.sent == []
    first = listed.first_page()
    assert first.items == () and first.next_cursor is None
    assert queries(stub) == [
        {"cursor": ["c9"], "status": ["dead"], "merchant": ["acme"], "limit": ["20"]}
    ]


def test_a_list_that_answers_its_own_cursor_again_stops(stub):
    stub.answer(200, page(["a"], "c1")).answer(200, page(["b"], "c1"))
    with pytest.raises(ApiError, match="its own cursor"):
        list(Client(stub.url, "k").list_event_types())
    assert len(stub.sent) == 2


def test_an_answer_that_is_no_page_raises(stub):
    stub.answer(200, {"items": "nope"})
    with pytest.raises(ApiError, match="not a page"):
        list(Client(stub.url, "k").list_event_types())
