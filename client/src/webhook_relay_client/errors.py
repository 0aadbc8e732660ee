"""What a call raises: one family, so `except RelayError` catches them all.

A problem+json answer (RFC 9457, the API's one error shape) becomes a
`ProblemError` carrying its status, title, detail and field errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PROBLEM_CONTENT_TYPE = "application/problem+json"
# How much of an answer that is not a problem an error message quotes.
EXCERPT_CHARS = 200


class RelayError(Exception):
    """Anything this library raises about a call to the relay."""


class TransportError(RelayError):
    """No answer: the connection failed or timed out (the cause is chained)."""


class ApiError(RelayError):
    """An answer the call cannot use: an error status without a problem body,
    a redirect (never followed), or a body that is not the JSON expected."""

    def __init__(self, message: str, *, status: int, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        # Seconds the server asked to wait (429, 503), when it said.
        self.retry_after = retry_after


@dataclass(frozen=True)
class FieldError:
    """One entry of a problem's `errors`: where (`("body", "url")`) and why."""

    loc: tuple[str | int, ...]
    msg: str

    def __str__(self) -> str:
        return f"{'.'.join(str(part) for part in self.loc)}: {self.msg}"


class ProblemError(ApiError):
    """A problem+json answer: `status`, `title`, `detail`, `type` and `errors`."""

    def __init__(
        self,
        *,
        status: int,
        title: str,
        detail: str,
        type: str = "about:blank",
        errors: tuple[FieldError, ...] = (),
        retry_after: float | None = None,
    ):
        message = f"{status} {title}: {detail}"
        if errors:
            message += " (" + "; ".join(str(e) for e in errors) + ")"
        super().__init__(message, status=status, retry_after=retry_after)
        self.title = title
        self.detail = detail
        self.type = type
        self.errors = errors

    def errors_at(self, *loc: str | int) -> tuple[str, ...]:
        """The messages of the field errors at exactly `loc`, e.g. ("body", "url")."""
        return tuple(e.msg for e in self.errors if e.loc == loc)


def error_from_answer(
    status: int, content_type: str, body: bytes, *, retry_after: float | None
) -> ApiError:
    """The exception for an error answer: a ProblemError when the body is a
    problem document, else an ApiError quoting the start of the body."""
    problem = _problem(content_type, body)
    if problem is None:
        excerpt = body[:EXCERPT_CHARS].decode("utf-8", "replace")
        return ApiError(
            f"{status} without a problem+json body: {excerpt!r}",
            status=status,
            retry_after=retry_after,
        )
    errors = tuple(
        FieldError(loc=tuple(e.get("loc") or ()), msg=str(e.get("msg", "")))
        for e in problem.get("errors") or ()
        if isinstance(e, dict)
    )
    return ProblemError(
        # The HTTP status is the truth; a body may disagree with it.
        status=status,
        title=str(problem.get("title") or ""),
        detail=str(problem.get("detail") or ""),
        type=str(problem.get("type") or "about:blank"),
        errors=errors,
        retry_after=retry_after,
    )


def _problem(content_type: str, body: bytes) -> dict | None:
    if content_type.split(";")[0].strip().lower() != PROBLEM_CONTENT_TYPE:
        return None
    try:
        problem: Any = json.loads(body)
    except (ValueError, RecursionError):  # not JSON; JSON nested too deeply
        return None
    return problem if isinstance(problem, dict) else None
