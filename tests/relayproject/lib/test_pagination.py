"""Cursor pagination of deliveries does not shift when new rows arrive."""

from __future__ import annotations

import pytest

from deliveries.services import event_publish
from tests.support import factories

pytestmark = pytest.mark.django_db


def _publish(merchant, n: int) -> list[str]:
    return [
        event_publish(merchant=merchant, type="a.b", data={}).created_deliveries[0].pk
        for _ in range(n)
    ]


def test_pages_stay_stable_while_deliveries_are_inserted(platform, merchant):
    factories.endpoint(merchant)
    original = _publish(merchant, 5)
    seen, cursor = [], ""
    while True:
        page = platform.get(f"/deliveries?limit=2&cursor={cursor}").json()
        seen += [d["id"] for d in page["items"]]
        _publish(merchant, 1)  # arrives between pages, newest of all
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(original, reverse=True)


def test_blank_filters_mean_no_filter(platform):
    # The form a query template leaves behind: `?status=&merchant=&...`.
    response = platform.get("/deliveries?status=&merchant=&endpoint_id=&cursor=")

    assert response.status_code == 200
    assert set(response.json()) == {"items", "next_cursor"}
