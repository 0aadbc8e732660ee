"""The REST API for other services, mounted at /api/v1/ (CONTRACT.md section 3).

Every error leaves here as application/problem+json; the handlers below turn
ninja's, pydantic's and the services' exceptions into that one shape.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder

from deliveries.api import endpoint_router as endpoint_deliveries_router
from deliveries.api import router as deliveries_router
from deliveries.notifications.api import router as operational_router
from deliveries.publish.sanitize import UNSTORABLE
from deliveries.pull_api import router as pull_router
from deliveries.signing import format_timestamp
from endpoints.api import router as endpoints_router
from endpoints.api import sessions_and_types_router
from endpoints.apikeys import ApiKeyAuth, visible_endpoint, visible_merchant
from endpoints.matching import EVENT_TYPE_RE, SUBSCRIPTION_RE
from endpoints.schemas import SLUG_PATTERN
from endpoints.switched_off import MerchantSwitchedOff
from relayproject.lib.jsonlimits import json_depth
from relayproject.lib.limits import LimitExceeded
from relayproject.lib.plainerrors import fields_detail, plain_message
from relayproject.lib.problems import (
    PROBLEM_CONTENT_TYPE,
    ApiProblem,
    errors_from_message_dict,
    problem_response,
)
from relayproject.lib.strictquery import strict_query

logger = logging.getLogger("deliveries.api")

BODY_REFUSALS = {
    400: "Malformed JSON",
    413: "Body larger than MAX_EVENT_BYTES",
    415: "Body is not application/json",
}


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str):
    # Python's json accepts NaN and Infinity; JSON (and PostgreSQL) do not.
    raise _NotJson(f"{name} is not JSON.")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJson(f"{text} does not fit a 64-bit float.")
    return value


# An event's data sits at most this deep in a body: {"events": [{"data": ...}]}.
EVENT_DATA_OFFSET = 3


class ObjectParser(Parser):
    def parse_body(self, request: HttpRequest) -> dict:
        try:
            data = json.loads(
                request.body, parse_constant=_refuse_constant, parse_float=_finite
            )
        except _NotJson as exc:
            raise ApiProblem(400, str(exc)) from None
        except RecursionError:
            raise _too_deep() from None
        # Before anything below recurses into it. EventIn refuses data past
        # MAX_EVENT_DEPTH naming the field; this only stops bodies far deeper
        # than any schema accepts, with room left for EventIn to name it.
        limit = 2 * settings.MAX_EVENT_DEPTH + EVENT_DATA_OFFSET
        if json_depth(data, stop_above=limit) > limit:
            raise _too_deep()
        if not isinstance(data, dict):
            # Well-formed JSON of the wrong shape is a 422, not a parse error.
            raise ApiProblem(
                422,
                "The body must be a JSON object.",
                [{"loc": ["body"], "msg": "Must be a JSON object."}],
            )
        bad_at = None
        if _may_be_unstorable(request.body):
            bad_at = _unstorable_location(data, ["body"])
        if bad_at is not None:
            # PostgreSQL text and jsonb cannot hold U+0000, and no database can
            # encode a lone surrogate ("\ud800" in JSON) as UTF-8: refuse both up
            # front with the field named, rather than fail at INSERT or claim time.
            raise ApiProblem(
                422,
                "Strings may not contain the NUL character (U+0000) "
                "or a lone surrogate (U+D800 to U+DFFF).",
                [{"loc": bad_at, "msg": "Contains U+0000 or a lone surrogate."}],
            )
        return data


def _too_deep() -> ApiProblem:
    return ApiProblem(
        422,
        f"The body nests deeper than MAX_EVENT_DEPTH ({settings.MAX_EVENT_DEPTH}).",
        [{"loc": ["body"], "msg": "Nested too deeply."}],
    )


def _may_be_unstorable(body: bytes) -> bool:
    """Whether a string in this body can hold NUL or a lone surrogate; if not,
    the walk below is skipped (a tenth of a batch's parsing, issue 21).

    json.loads reads bytes with no NUL byte as UTF-8 (UTF-16 and UTF-32 JSON
    have NUL bytes), decoding with surrogatepass: a string gets U+0000 or a
    surrogate only from a \\u escape or a surrogate's UTF-8 form, whose
    first byte is 0xED. A body with none of the three cannot hold either.
    """
    return b"\\u" in body or b"\xed" in body or b"\x00" in body


def _unstorable_location(value, loc: list) -> list | None:
    if isinstance(value, str):
        return loc if UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(key, str) and UNSTORABLE.search(key):
            return [*loc, key]
        found = _unstorable_location(item, [*loc, key])
        if found is not None:
            return found
    return None


class RelayEncoder(NinjaJSONEncoder):
    def default(self, o):
        if isinstance(o, datetime) and o.tzinfo is not None:
            # One shape for every timestamp, the same the webhook body carries.
            return format_timestamp(o)
        return super().default(o)


class RelayRenderer(JSONRenderer):
    encoder_class = RelayEncoder


class RelayApi(NinjaAPI):
    def get_openapi_schema(self, **kwargs):
        """Error answers are documented as problem+json, which is what they are."""
        schema = super().get_openapi_schema(**kwargs)
        problem = {"$ref": "#/components/schemas/Problem"}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if "requestBody" in operation:
                    # Refused by ApiProblemMiddleware before the operation runs.
                    for status, why in BODY_REFUSALS.items():
                        responses.setdefault(
                            str(status),
                            {
                                "description": why,
                                "content": {PROBLEM_CONTENT_TYPE: {"schema": problem}},
                            },
                        )
                for status, answer in responses.items():
                    content = answer.get("content", {})
                    if int(status) >= 400 and "application/json" in content:
                        content[PROBLEM_CONTENT_TYPE] = content.pop("application/json")
        return schema


api = RelayApi(
    title="webhook-relay",
    version="1",
    description="Provision merchants and endpoints, publish events, inspect and "
    "replay deliveries. Authenticate with `Authorization: Bearer <api key>`.",
    urls_namespace="api",
    auth=ApiKeyAuth(),
    parser=ObjectParser(),
    renderer=RelayRenderer(),
)
api.add_router("/", endpoints_router)
api.add_router("/", endpoint_deliveries_router)
api.add_router("/", sessions_and_types_router)
api.add_router("/", deliveries_router)
api.add_router("/", operational_router)
api.add_router("/", pull_router)
# Every operation, present and future: an undeclared query parameter is a 422.
api.add_decorator(strict_query, mode="view")


def _loc(loc) -> list:
    parts = [part if isinstance(part, int) else str(part) for part in loc]
    # Operations name their body parameter "payload"; clients never see it.
    if parts[:2] == ["body", "payload"]:
        del parts[1]
    return parts


# The API's patterns in words (relayproject/lib/plainerrors.py has the rest).
PATTERNS = {
    EVENT_TYPE_RE.pattern: "Must be dot-separated words of letters, digits, '_' "
    "or '-', e.g. order.paid.",
    SUBSCRIPTION_RE.pattern: "Must be an event type (e.g. order.paid) or a prefix "
    "ending in .* (e.g. order.*).",
    SLUG_PATTERN: "May hold only letters, digits, '-' and '_'.",
}


def _path_refusal(request: HttpRequest) -> HttpResponse | None:
    """The 404 (or 403) a merchant or endpoint in the path earns: answered
    before any field's 422, so an unknown merchant is never told about DNS."""
    match = request.resolver_match
    kwargs = match.kwargs if match else {}
    try:
        if "endpoint_id" in kwargs and "slug" in kwargs:
            visible_endpoint(request, kwargs["slug"], kwargs["endpoint_id"])
        elif "slug" in kwargs:
            visible_merchant(request, kwargs["slug"])
    except Http404 as exc:
        return _not_found(request, exc)
    except MerchantSwitchedOff as exc:
        return _switched_off(request, exc)
    return None


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    refused = _path_refusal(request)
    if refused is not None:
        return refused
    errors = [
        {"loc": _loc(e.get("loc", ())), "msg": plain_message(e, patterns=PATTERNS)}
        for e in exc.errors
    ]
    return problem_response(422, fields_detail(errors), errors)


@api.exception_handler(DjangoValidationError)
def _refused(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
    if hasattr(exc, "error_dict"):
        errors = errors_from_message_dict(exc.message_dict)
    else:
        errors = [{"loc": ["body"], "msg": m} for m in exc.messages]
    return problem_response(422, fields_detail(errors), errors)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = problem_response(
        401, "Send a live API key as `Authorization: Bearer <key>`."
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, ApiProblem):  # ninja wraps parser errors in a 400
        return _problem(request, exc.__cause__)
    return problem_response(exc.status_code, str(exc))


@api.exception_handler(ApiProblem)
def _problem(request: HttpRequest, exc: ApiProblem) -> HttpResponse:
    return problem_response(exc.status, exc.detail, exc.errors)


@api.exception_handler(MerchantSwitchedOff)
def _switched_off(request: HttpRequest, exc: MerchantSwitchedOff) -> HttpResponse:
    return problem_response(403, str(exc))


@api.exception_handler(LimitExceeded)
def _limited(request: HttpRequest, exc: LimitExceeded) -> HttpResponse:
    errors = [{"loc": ["body"], "msg": exc.detail}]
    response = problem_response(exc.status, exc.detail, errors)
    if exc.retry_after is not None:
        # Whole seconds (RFC 9110), rounded up so a client that waits passes.
        response["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return response


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem_response(404, str(exc) or "Not found.")


@api.exception_handler(IntegrityError)
def _conflict(request: HttpRequest, exc: IntegrityError) -> HttpResponse:
    # A concurrent request created the same thing first (e.g. a merchant slug).
    return problem_response(409, "Conflicts with a concurrent change; retry.")


@api.exception_handler(Exception)
def _server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("API operation failed: %s %s", request.method, request.path)
    return problem_response(500, "An internal error occurred.")
