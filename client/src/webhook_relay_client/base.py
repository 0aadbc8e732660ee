"""The plumbing every call shares: the URL, the bearer key, JSON both ways,
problem+json turned into exceptions, and retries on 429 and 503.

Which requests are retried: those that cannot act twice. GET, PATCH (it sets
fields to the values sent) and DELETE always; a POST only when it carries an
Idempotency-Key, so a publish that did happen is answered, not repeated.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from webhook_relay_client.errors import ApiError, error_from_answer
from webhook_relay_client.models import Page
from webhook_relay_client.pagination import Paginator
from webhook_relay_client.transport import (
    RETRY_STATUSES,
    Answer,
    RetryPolicy,
    Transport,
    retry_after_seconds,
    urllib_transport,
    utc_now,
)
from webhook_relay_client.version import __version__

API_PREFIX = "/api/v1"
DEFAULT_TIMEOUT = 10.0  # seconds, for the connect and for each read
RETRIED_METHODS = frozenset({"GET", "PATCH", "DELETE"})

T = TypeVar("T")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


# "Leave this field as it is": the default of every update_* argument, where
# None means "send null" (clear the value).
UNSET: Any = _Unset()


def segment(value: str) -> str:
    """One path segment, quoted; refuses what would point at another route."""
    if not isinstance(value, str) or value in ("", ".", ".."):
        raise ValueError(f"not a usable id or name: {value!r}")
    return urllib.parse.quote(value, safe="")


def fields(**values: Any) -> dict[str, Any]:
    """A JSON body of the fields given: UNSET ones left out."""
    return {name: value for name, value in values.items() if value is not UNSET}


def given(**values: Any) -> dict[str, Any]:
    """A JSON body or query of the values given: None ones left out."""
    return {name: value for name, value in values.items() if value is not None}


class BaseClient:
    """A client of one relay: `base_url` is its origin (with the prefix it is
    mounted under, if any), `api_key` a platform or merchant key."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: Transport = urllib_transport,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        if not api_key:
            raise ValueError("api_key is empty")
        root = base_url.rstrip("/")
        self.base_url = root if root.endswith(API_PREFIX) else root + API_PREFIX
        self._api_key = api_key
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._transport = transport
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"  # never the key

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[Any, Answer]:
        """Send, retrying when allowed; the parsed JSON (None for 204) and the
        answer. Raises ProblemError/ApiError for anything but 2xx."""
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        sent = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": f"webhook-relay-client/{__version__}",
            **(headers or {}),
        }
        data = None
        if body is not None:
            data = json.dumps(body, allow_nan=False).encode("utf-8")
            sent["Content-Type"] = "application/json"
        may_retry = method in RETRIED_METHODS or "Idempotency-Key" in sent
        retry = 0
        while True:
            answer = self._transport(method, url, sent, data, self.timeout)
            if 200 <= answer.status < 300:
                return self._json(answer), answer
            retry_after = retry_after_seconds(
                answer.header("Retry-After"), now=self._clock()
            )
            if (
                answer.status in RETRY_STATUSES
                and may_retry
                and retry < self.retry.max_retries
            ):
                self._sleep(self.retry.wait(retry, retry_after))
                retry += 1
                continue
            raise self._error(answer, retry_after)

    def _json(self, answer: Answer) -> Any:
        if answer.status == 204 or not answer.body:
            return None
        try:
            return json.loads(answer.body)
        except ValueError:
            raise ApiError(
                f"{answer.status} with a body that is not JSON", status=answer.status
            ) from None
        except RecursionError:  # a hostile or broken relay's [[[[...]]]]
            raise ApiError(
                f"{answer.status} with JSON nested too deeply to read",
                status=answer.status,
            ) from None

    def _error(self, answer: Answer, retry_after: float | None) -> ApiError:
        if 300 <= answer.status < 400:
            location = answer.header("Location") or "nowhere"
            return ApiError(
                f"{answer.status} redirect to {location}, not followed: is "
                "base_url the relay's own URL (https, the right host and prefix)?",
                status=answer.status,
            )
        return error_from_answer(
            answer.status,
            answer.header("Content-Type"),
            answer.body,
            retry_after=retry_after,
        )

    def _get(self, path: str, model: Any, **query: Any) -> Any:
        data, answer = self._call("GET", path, query=given(**query))
        return self._build(model, data, answer)

    def _build(self, model: Any, data: Any, answer: Answer, **extra: Any) -> Any:
        try:
            return model.from_json(data, **extra)
        except (ValueError, TypeError) as exc:
            raise ApiError(f"unexpected answer: {exc}", status=answer.status) from None

    def _list(
        self, path: str, model: Any, *, cursor: str | None = None, **query: Any
    ) -> Paginator[Any]:
        def fetch(at: str | None) -> Page[Any]:
            data, answer = self._call("GET", path, query=given(cursor=at, **query))
            if not isinstance(data, Mapping) or not isinstance(data.get("items"), list):
                raise ApiError("unexpected answer: not a page", status=answer.status)
            items = tuple(self._build(model, item, answer) for item in data["items"])
            return Page(items=items, next_cursor=data.get("next_cursor"))

        return Paginator(fetch, cursor=cursor)
