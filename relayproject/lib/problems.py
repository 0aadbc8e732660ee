"""RFC 9457 problem+json answers for everything under the relay's api/ path.

The middleware refuses oversized and non-JSON bodies before anything reads
them, and rewrites Django's own error pages (unknown path, wrong method) on
API paths into problems, so clients parse one error shape everywhere.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from http import HTTPStatus

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.request import HttpHeaders
from django.urls import (
    NoReverseMatch,
    Resolver404,
    get_script_prefix,
    get_urlconf,
    resolve,
    reverse,
)
from ninja import Schema

PROBLEM_CONTENT_TYPE = "application/problem+json"
# Two of the API's routes, by name: their paths follow wherever the URLconf
# mounts the relay (/api/v1/ standalone, under the prefix a host project
# chose otherwise), so nothing else in that project is taken for the API.
API_ROOT_ROUTE = "api:openapi-json"
BATCH_ROUTE = "api:event_batch_create"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class ProblemError(Schema):
    loc: list[str | int]
    msg: str


class Problem(Schema):
    type: str
    title: str
    status: int
    detail: str
    errors: list[ProblemError]


def problem_body(
    status: int,
    detail: str = "",
    errors: Iterable[dict] = (),
    *,
    title: str | None = None,
) -> dict:
    phrase = HTTPStatus(status).phrase
    return {
        # RFC 9457's default: the status and title say it all, and no page
        # that nothing serves is named.
        "type": "about:blank",
        "title": title or phrase,
        "status": status,
        "detail": detail or phrase,
        "errors": [{"loc": list(e["loc"]), "msg": str(e["msg"])} for e in errors],
    }


def problem_response(
    status: int, detail: str = "", errors: Iterable[dict] = (), **kwargs
) -> HttpResponse:
    return HttpResponse(
        json.dumps(problem_body(status, detail, errors, **kwargs)),
        status=status,
        content_type=PROBLEM_CONTENT_TYPE,
    )


def errors_from_message_dict(
    message_dict: dict[str, Sequence[str]], *, prefix: Sequence[str | int] = ("body",)
) -> list[dict]:
    """A django ValidationError's fields as problem errors (NON_FIELD -> the body;
    "target.exchange" -> [..., "target", "exchange"], as pydantic nests them)."""
    errors = []
    for field, messages in message_dict.items():
        loc = [*prefix] if field == "__all__" else [*prefix, *field.split(".")]
        errors.extend({"loc": loc, "msg": m} for m in messages)
    return errors


@functools.lru_cache(maxsize=16)
def _api_paths(urlconf: object, script_prefix: str) -> tuple[str, str] | None:
    try:
        root = reverse(API_ROOT_ROUTE, urlconf=urlconf)
        batch = reverse(BATCH_ROUTE, urlconf=urlconf)
    except NoReverseMatch:
        return None
    # The folder that holds v1/ is the API's: its unknown paths (a version
    # that does not exist) are answered as problems too.
    version_root = root.removesuffix("openapi.json").rstrip("/")
    return version_root.rpartition("/")[0] + "/", batch.rstrip("/")


def api_paths() -> tuple[str, str] | None:
    """(the API's path prefix, its batch route) as request.path spells them in
    this request, or None where the URLconf routes no relay API."""
    return _api_paths(get_urlconf() or settings.ROOT_URLCONF, get_script_prefix())


def body_limit(path: str) -> int:
    # A batch carries many events; Django's own upload ceiling bounds it, and
    # each event in it is checked against MAX_EVENT_BYTES on its own.
    paths = api_paths()
    if paths is not None and path.rstrip("/") == paths[1]:
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return settings.MAX_EVENT_BYTES


class ApiProblemMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        paths = api_paths()
        if paths is None or not request.path.startswith(paths[0]):
            return self.get_response(request)
        refused = self._refuse_nul(request) or self._refuse_body(request)
        if refused is not None:
            return refused
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if response.status_code >= 400 and not content_type.startswith(
            PROBLEM_CONTENT_TYPE
        ):
            rewritten = problem_response(
                response.status_code, _without_slash_detail(request, response)
            )
            if response.has_header("Allow"):
                rewritten["Allow"] = response["Allow"]
            return rewritten
        return response

    def _refuse_nul(self, request: HttpRequest) -> HttpResponse | None:
        """U+0000 cannot be stored or matched by PostgreSQL: refuse it before a query."""
        if "\x00" in request.path:
            return problem_response(404, "No object has an id with U+0000 in it.")
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in v for v in values):
                return problem_response(
                    422,
                    "Query parameters may not contain U+0000.",
                    [{"loc": ["query", name], "msg": "Contains U+0000."}],
                )
        # The headers as request.headers would name them, read from META
        # without building that mapping for every request.
        for key, value in request.META.items():
            if (
                isinstance(value, str)
                and "\x00" in value
                and (key.startswith("HTTP_") or key in HttpHeaders.UNPREFIXED_HEADERS)
            ):
                name = HttpHeaders.parse_header_name(key)
                return problem_response(
                    422,
                    "Headers may not contain U+0000.",
                    [{"loc": ["header", name], "msg": "Contains U+0000."}],
                )
        return None

    def _refuse_body(self, request: HttpRequest) -> HttpResponse | None:
        if request.method not in BODY_METHODS:
            return None
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            # The size limit is decided from Content-Length before reading.
            return problem_response(
                411, "Send a Content-Length; chunked bodies are refused."
            )
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return problem_response(400, "Content-Length is not a number.")
        limit = body_limit(request.path)
        if length > limit:
            return problem_response(
                413, f"The body is {length} bytes; at most {limit} are accepted."
            )
        media_type = request.content_type or ""
        if length > 0 and media_type != "application/json":
            return problem_response(
                415, f"Bodies are application/json, not {media_type or 'untyped'}."
            )
        return None


def _without_slash_detail(request: HttpRequest, response: HttpResponse) -> str:
    """For a 404 on a path that exists without its trailing slash, say so
    (no redirect: a client's POST would not follow one as a POST)."""
    if response.status_code != 404 or not request.path_info.endswith("/"):
        return ""
    try:
        resolve(request.path_info.rstrip("/"))
    except Resolver404:
        return ""
    bare = request.path.rstrip("/")
    return f"No such path; API paths have no trailing slash: {bare}"


class ApiProblem(Exception):
    """Raised by an operation to answer with a problem naming fields."""

    def __init__(self, status: int, detail: str, errors: Iterable[dict] = ()) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)


# The error answers every operation documents, beside its own. 403: among
# others, any call for a merchant staff switched off (endpoints/switched_off.py).
COMMON_ERRORS = {401: Problem, 403: Problem, 404: Problem, 422: Problem}
