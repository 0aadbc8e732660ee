"""Checks of an endpoint's own fields: those endpoint_create and endpoint_update
run before writing anything (a pull endpoint's among them), and the HTTP url
check the API's schemas run with theirs (its destination: endpoints/broker_fields.py; its auth and tls:
endpoints/client_credentials.py; its retry policy: endpoints/retry_policy.py)."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError

from endpoints import broker_fields, brokers, signing_keys
from endpoints.custom_headers import header_errors
from endpoints.filtering import filter_errors
from endpoints.matching import is_valid_subscription

MAX_IN_FLIGHT_LIMIT = 1000  # sends at once to one endpoint, across all dispatchers
VISIBILITY_TIMEOUT_LIMIT = 43200  # seconds a pull lease may last: twelve hours
# What shapes a send: a pull endpoint is sent nothing, so each would mean nothing.
SENDING_FIELDS = (
    "headers",
    "auth",
    "tls",
    "permanent_statuses",
    "rate_limit_per_second",
    "max_in_flight",
    "timeout_seconds",
)


def endpoint_url_check(url: str) -> None:
    """Raise ValidationError({"url": reason}) when the policy refuses an HTTP url."""
    if problems := broker_fields.http_url_errors(url):
        raise ValidationError({"url": problems})


def field_errors(
    *,
    event_types: Sequence[str] | None,
    max_attempts: int | None,
    rate_limit_per_second: float | None,
    filter: object = None,
    headers: object = None,
    max_in_flight: int | None = None,
    permanent_statuses: object = None,
    signing: object = None,
) -> dict[str, list[str]]:
    # max_attempts: checked with the rest of the retry policy (endpoints/retry_policy.py).
    del max_attempts
    errors: dict[str, list[str]] = {}
    if problems := signing_keys.scheme_errors(signing):
        errors["signing"] = problems
    if problems := permanent_status_errors(permanent_statuses):
        errors["permanent_statuses"] = problems
    if problems := filter_errors(filter):
        errors["filter"] = problems
    if problems := header_errors(headers):
        errors["headers"] = problems
    if event_types is not None:
        bad = [
            t
            for t in event_types
            if not isinstance(t, str) or not is_valid_subscription(t)
        ]
        if bad:
            errors["event_types"] = [
                f"Not an event type or prefix.* pattern: {bad[0]!r}."
            ]
    if rate_limit_per_second is not None and not 0 < rate_limit_per_second <= 10000:
        errors["rate_limit_per_second"] = ["Must be above 0 and at most 10000."]
    if max_in_flight is not None and not 1 <= max_in_flight <= MAX_IN_FLIGHT_LIMIT:
        errors["max_in_flight"] = [f"Must be between 1 and {MAX_IN_FLIGHT_LIMIT}."]
    return errors


MAX_PERMANENT_STATUSES = 50


def permanent_status_errors(statuses: object) -> list[str]:
    """What is wrong with a permanent_statuses list ([] when nothing; None: unset)."""
    if statuses is None:
        return []
    if not isinstance(statuses, list | tuple):
        return ["A list of HTTP status codes, e.g. [400, 404]."]
    if len(statuses) > MAX_PERMANENT_STATUSES:
        return [f"At most {MAX_PERMANENT_STATUSES} statuses."]
    for status in statuses:
        if isinstance(status, bool) or not isinstance(status, int):
            return [f"Not a status code: {status!r}."]
        if status == 410:
            return ["410 always stops delivery and disables the endpoint."]
        if not 300 <= status <= 599:
            return [f"{status}: only 300-599 can be a failure to stop on."]
    return []


def pull_field_errors(
    *, kind: str, given: dict[str, object], visibility_timeout_seconds: object
) -> dict[str, list[str]]:
    """What a pull endpoint cannot take, and where a visibility timeout cannot
    go. kind is the endpoint's after the change; given holds SENDING_FIELDS
    as sent (None, [] and {} say nothing and pass); visibility_timeout_seconds
    None: not given, or cleared."""
    errors: dict[str, list[str]] = {}
    if kind == brokers.PULL:
        for name in SENDING_FIELDS:
            if given.get(name) not in (None, [], {}, ()):
                errors[name] = [
                    f"A pull endpoint takes no {name}: the relay sends it "
                    "nothing, its consumer fetches its messages."
                ]
    elif visibility_timeout_seconds is not None:
        errors["visibility_timeout_seconds"] = [
            "Only a pull endpoint has a visibility timeout."
        ]
        return errors
    value = visibility_timeout_seconds
    if value is not None and (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= VISIBILITY_TIMEOUT_LIMIT
    ):
        errors["visibility_timeout_seconds"] = [
            f"Whole seconds from 1 to {VISIBILITY_TIMEOUT_LIMIT}."
        ]
    return errors
