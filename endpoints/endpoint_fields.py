"""Checks of an endpoint's own fields: those endpoint_create and endpoint_update
run before writing anything, and the HTTP url check the API's schemas run with
theirs (its destination: endpoints/broker_fields.py; its auth and tls:
endpoints/client_credentials.py; its retry policy: endpoints/retry_policy.py)."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError

from endpoints import broker_fields, signing_keys
from endpoints.custom_headers import header_errors
from endpoints.filtering import filter_errors
from endpoints.matching import is_valid_subscription

MAX_IN_FLIGHT_LIMIT = 1000  # sends at once to one endpoint, across all dispatchers


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
