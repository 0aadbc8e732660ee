"""The operational event types in the event-type catalogue, with a JSON Schema
and an example each, so a platform reads what its operational endpoints will
receive where it reads every other type (GET /event-types, the admin).

The relay owns the names: they are written from here after every `migrate`
(and every test flush), overwriting any edit, and the catalogue refuses to
create, change or delete a `relay.*` type (endpoints/catalogue.py). The
schemas describe `data`; extra fields may be added later, so none forbids
them. They are enforced like any other: the relay's own publishes are
validated against them, so a payload that drifts from its documentation
fails the tests that emit it.
"""

from __future__ import annotations

from deliveries.notifications.operational import (
    CERTIFICATE_EXPIRING,
    DELIVERY_DEAD,
    ENDPOINT_DISABLED,
    ENDPOINT_ENABLED,
    ENDPOINT_FAILING,
    ENDPOINT_VERIFICATION,
    OPERATIONAL_TYPES,
)
from endpoints.catalogue import cache_clear
from endpoints.models import EventType

SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"
TIME = {"type": "string", "format": "date-time"}
TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
COUNT = {"type": "integer", "minimum": 0}

ENDPOINT = {
    "type": "object",
    "description": "The merchant's endpoint this is about.",
    "required": ["id", "url"],
    "properties": {
        "id": {"type": "string"},
        "url": {"type": "string"},
        "description": {"type": "string"},
    },
}
WHO = {
    "merchant": {"type": "string", "description": "The merchant's slug."},
    "endpoint": ENDPOINT,
}
BREAKER = {
    "breaker_state": {"enum": ["closed", "open", "half_open"]},
    "breaker_reason": {"type": "string"},
    "consecutive_failures": COUNT,
    "last_success_at": TIME_OR_NULL,
    "last_failure_at": TIME_OR_NULL,
}
LAST_ERROR = {
    "last_error": {
        "type": "string",
        "description": 'The last failed attempt, e.g. "HTTP 503" or "timeout".',
    },
    "last_status_code": {"type": ["integer", "null"]},
}


def _schema(title: str, required: list[str], properties: dict) -> dict:
    return {
        "$schema": SCHEMA_DRAFT,
        "title": title,
        "type": "object",
        "required": ["merchant", "endpoint", *required],
        "properties": {**WHO, **properties},
    }


EXAMPLE_ENDPOINT = {
    "id": "ep_01jz8k3m5q7r9t1v3x5z7b9d1f",
    "url": "https://shop.example.com/webhooks",
    "description": "Orders service",
}
EXAMPLE_BREAKER = {
    "breaker_state": "open",
    "breaker_reason": "opened after 10 consecutive failures (last: http 503)",
    "consecutive_failures": 10,
    "last_success_at": "2026-12-01T08:14:02.120Z",
    "last_failure_at": "2026-12-03T14:02:11.482Z",
}

CATALOGUE: dict[str, dict] = {
    ENDPOINT_FAILING: {
        "schema": _schema(
            "An endpoint is failing",
            ["trigger", "failing_since", "failed_attempts", "breaker_state"],
            {
                "trigger": {
                    "enum": ["breaker_open", "no_success_50", "no_success_90"],
                    "description": "Why now: the breaker opened, or no success "
                    "for 50% or 90% of the auto-disable window.",
                },
                "failing_since": TIME,
                "failed_attempts": COUNT,
                "auto_disable_at": {
                    **TIME_OR_NULL,
                    "description": "When it is disabled if nothing succeeds; "
                    "null when staff exempted it.",
                },
                **BREAKER,
                **LAST_ERROR,
            },
        ),
        "example": {
            "merchant": "acme",
            "endpoint": EXAMPLE_ENDPOINT,
            **EXAMPLE_BREAKER,
            "trigger": "breaker_open",
            "failing_since": "2026-12-03T13:40:00.000Z",
            "failed_attempts": 10,
            "auto_disable_at": "2026-12-08T13:40:00.000Z",
            "last_error": "HTTP 503",
            "last_status_code": 503,
        },
    },
    ENDPOINT_DISABLED: {
        "schema": _schema(
            "An endpoint was disabled",
            ["disabled_at", "reason", "by", "held_deliveries", "breaker_state"],
            {
                "disabled_at": TIME,
                "reason": {"type": "string"},
                "by": {
                    "type": "string",
                    "description": 'Who: "auto-disable", "staff", "merchant", '
                    '"api", "receiver" (a 410) or "unknown".',
                },
                "actor": {"type": "string", "description": "Their name, if any."},
                "held_deliveries": {
                    **COUNT,
                    "description": "Pending deliveries kept, not dead-lettered, "
                    "until it is enabled again.",
                },
                **BREAKER,
                **LAST_ERROR,
            },
        ),
        "example": {
            "merchant": "acme",
            "endpoint": EXAMPLE_ENDPOINT,
            **EXAMPLE_BREAKER,
            "disabled_at": "2026-12-08T13:41:00.000Z",
            "reason": "auto-disabled: no success for 120 h and 412 failed attempts",
            "by": "auto-disable",
            "actor": "",
            "held_deliveries": 37,
            "last_error": "HTTP 503",
            "last_status_code": 503,
        },
    },
    ENDPOINT_ENABLED: {
        "schema": _schema(
            "A disabled endpoint was enabled again",
            ["enabled_at", "held_deliveries", "breaker_state"],
            {"enabled_at": TIME, "held_deliveries": COUNT, **BREAKER},
        ),
        "example": {
            "merchant": "acme",
            "endpoint": EXAMPLE_ENDPOINT,
            **EXAMPLE_BREAKER,
            "breaker_state": "closed",
            "breaker_reason": "",
            "consecutive_failures": 0,
            "enabled_at": "2026-12-09T09:00:00.000Z",
            "held_deliveries": 37,
        },
    },
    DELIVERY_DEAD: {
        "schema": _schema(
            "Deliveries to an endpoint were dead-lettered",
            [
                "count",
                "first_delivery_id",
                "last_delivery_id",
                "first_dead_at",
                "last_dead_at",
            ],
            {
                "count": {**COUNT, "minimum": 1},
                "first_delivery_id": {"type": "string"},
                "last_delivery_id": {"type": "string"},
                "first_dead_at": TIME,
                "last_dead_at": TIME,
                **LAST_ERROR,
            },
        ),
        "example": {
            "merchant": "acme",
            "endpoint": EXAMPLE_ENDPOINT,
            "count": 50,
            "first_delivery_id": "dlv_01jz8m0c2e4g6j8m0p2r4t6w8y",
            "last_delivery_id": "dlv_01jz8m1d3f5h7k9n1q3s5v7x9z",
            "first_dead_at": "2026-12-03T14:02:11.482Z",
            "last_dead_at": "2026-12-03T14:02:49.907Z",
            "last_error": "HTTP 400: unknown order",
            "last_status_code": 400,
        },
    },
    CERTIFICATE_EXPIRING: {
        "schema": _schema(
            "An endpoint's client certificate expires soon, or has expired",
            ["subject", "not_after", "days_left", "expired"],
            {
                "subject": {
                    "type": "string",
                    "description": "The certificate's subject, as the endpoint shows it.",
                },
                "not_after": TIME,
                "days_left": {
                    "type": "integer",
                    "description": "Whole days until not_after, rounded down: "
                    "0 on its last day, negative once it has expired.",
                },
                "expired": {"type": "boolean"},
            },
        ),
        "example": {
            "merchant": "acme",
            "endpoint": EXAMPLE_ENDPOINT,
            "subject": "CN=relay.acme.example,O=Acme",
            "not_after": "2026-12-17T12:00:00.000Z",
            "days_left": 9,
            "expired": False,
        },
    },
    ENDPOINT_VERIFICATION: {
        "schema": _schema(
            "Prove this endpoint wants the traffic",
            ["challenge"],
            {
                "challenge": {
                    "type": "string",
                    "description": "Answer 2xx with it as the whole body, or "
                    'as {"challenge": "..."}; or paste it into the portal. '
                    "Unique to this request; it is never stored in clear.",
                },
            },
        ),
        "example": {
            "merchant": "acme",
            "endpoint": EXAMPLE_ENDPOINT,
            "challenge": "vrfy_3q2-7wVJ0xk9ZtQ4mRn1pS8uYb6cEd5fGh2iJk0lMn4",
        },
    },
}
assert set(CATALOGUE) == set(OPERATIONAL_TYPES)  # one entry per operational type


def operational_types_register(*, model=EventType, using: str = "default") -> None:
    """Write the relay's own types into the catalogue, as this module says."""
    for name, entry in CATALOGUE.items():
        model.objects.using(using).update_or_create(
            name=name,
            defaults={
                "description": OPERATIONAL_TYPES[name],
                "schema": entry["schema"],
                "example": entry["example"],
                "deprecated": False,
            },
        )
    cache_clear()


def register_after_migrate(*, apps=None, using: str = "default", **kwargs) -> None:
    """post_migrate; it also follows a test flush (which empties the table),
    where Django passes no `apps`: the table is there, use the real model."""
    model = EventType
    if apps is not None:
        try:
            model = apps.get_model("endpoints", "EventType")
        except LookupError:
            return  # migrated back to before the catalogue existed
    operational_types_register(model=model, using=using)
