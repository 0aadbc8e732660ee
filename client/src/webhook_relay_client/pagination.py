"""Cursor lists: `{"items": [...], "next_cursor": "..." | null}`, walked lazily."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from webhook_relay_client.errors import ApiError
from webhook_relay_client.models import Page

T = TypeVar("T")


class Paginator(Generic[T]):
    """Every item of a list, newest first, one request per page as you iterate.

    `for delivery in client.list_deliveries(status="dead")` walks them all;
    `.pages()` yields the pages themselves (to keep a page's `next_cursor`
    and resume later with `cursor=`). Nothing is requested until iterated.
    """

    def __init__(
        self, fetch: Callable[[str | None], Page[T]], *, cursor: str | None = None
    ) -> None:
        self._fetch = fetch
        self._cursor = cursor

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from page.items

    def pages(self) -> Iterator[Page[T]]:
        cursor = self._cursor
        while True:
            page = self._fetch(cursor)
            yield page
            if not page.next_cursor:
                return
            if page.next_cursor == cursor:
                # The same page again, forever: stop rather than loop.
                raise ApiError(
                    f"the list answered its own cursor {cursor!r} as the next one",
                    status=200,
                )
            cursor = page.next_cursor

    def first_page(self) -> Page[T]:
        return next(self.pages())
