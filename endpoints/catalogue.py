"""The event-type catalogue: names, descriptions, JSON Schemas and examples.

Schemas are checked with `jsonschema` when saved (the draft named by
`$schema`, 2020-12 by default), and published data is validated against
them (deliveries/publish/validation.py asks `schema_problems` for each event), on
validators that cannot fetch, backtrack or run without bound
(endpoints/schema_safety.py). So
that a publish costs no extra round trip, each process keeps the compiled
validators of every type with a schema for CACHE_SECONDS: a schema changed
through this module applies at once in the process that changed it, and
within CACHE_SECONDS in every other one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import referencing.exceptions
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from jsonschema import SchemaError

from endpoints import schema_checks, schema_safety
from endpoints.matching import is_valid_event_type
from endpoints.models import EventType
from relayproject.lib.jsonlimits import json_depth, json_problems
from relayproject.lib.ttlcache import TtlCache

MAX_PROBLEMS_PER_EVENT = schema_safety.MAX_ERRORS
MAX_SCHEMA_DEPTH = 100  # the walks below, and jsonschema's, recurse
RESERVED_PREFIX = "relay."
RESERVED_MESSAGE = (
    "relay.* event types are the relay's own (operational events); they are "
    "documented in the catalogue and cannot be added, changed or deleted."
)
CACHE_SECONDS = 2.0
_UNSET = object()
# One entry: every type's validator, read together in one query.
_validators: TtlCache[str, dict[str, object]] = TtlCache(
    ttl=lambda: CACHE_SECONDS, max_entries=1
)


def cache_clear() -> None:
    _validators.clear()


def _validators_now() -> dict[str, object]:
    """Compiled validators by type name, read at most every CACHE_SECONDS."""
    validators = _validators.get("all")
    if validators is None:
        rows = EventType.objects.filter(schema__isnull=False).values_list(
            "name", "schema"
        )
        validators = {name: _loaded(schema) for name, schema in rows}
        _validators.put("all", validators)
    return validators


def _loaded(schema: object) -> object:
    """A safe validator, or the refusal of a schema stored before the checks of
    schema_safety existed: such a schema is never evaluated."""
    if not isinstance(schema, dict):
        return _Refusing("The schema of this event type is not a JSON object.")
    refusals = schema_checks.static_refusals(schema)
    if refusals:
        return _Refusing(
            f"The schema of this event type cannot be evaluated safely "
            f"({refusals[0]}); staff must change it in the catalogue."
        )
    return schema_safety.safe_validator(schema)


@dataclass(frozen=True)
class _Refusing:
    message: str


def schema_problems(*, type: str, data: object) -> list[tuple[list, str]]:
    """(path in data, message) for each way data fails its type's schema."""
    validator = _validators_now().get(type)
    if validator is None:
        return []
    return [(p.path, p.message) for p in _data_problems(validator, data, 0)]


@dataclass(frozen=True)
class PayloadProblem:
    index: int  # which event of the publish
    path: list[str | int]  # where in its data
    message: str


def _data_problems(validator, data: object, index: int) -> list[PayloadProblem]:
    if isinstance(validator, _Refusing):
        return [PayloadProblem(index, [], validator.message)]
    try:
        # Only the errors shown are built: the rest are never drawn.
        errors = schema_safety.bounded_errors(
            validator, data, limit=MAX_PROBLEMS_PER_EVENT
        )
    except schema_safety.SchemaTooCostly:
        return [
            PayloadProblem(
                index,
                [],
                "Checking this data against its event type's schema took more "
                "than the allowed number of steps; the data is refused.",
            )
        ]
    except referencing.exceptions.Unresolvable as exc:
        message = f"The schema has a $ref that cannot be resolved: {exc}"
        return [PayloadProblem(index, [], message[:300])]
    errors.sort(key=lambda e: list(e.absolute_path))
    return [
        PayloadProblem(index, list(e.absolute_path), e.message[:300]) for e in errors
    ]


def _path_text(path: Sequence[str | int]) -> str:
    return "/".join(str(p) for p in path) or "(the whole object)"


def is_reserved(name: str) -> bool:
    """relay.* types are the relay's own (its operational events, relay.test)."""
    return name.startswith(RESERVED_PREFIX)


def _refuse_reserved(event_type: EventType) -> None:
    if is_reserved(event_type.name):
        raise ValidationError({"name": [RESERVED_MESSAGE]})


def fields_errors(
    *, name: str | None, description: object, schema: object, example: object
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if name is not None and not is_valid_event_type(name):
        errors["name"] = [
            "An event type is dot-separated words of letters, digits, _ and -, "
            "e.g. order.created."
        ]
    elif name is not None and is_reserved(name):
        errors["name"] = [RESERVED_MESSAGE]
    if isinstance(description, str) and len(description) > 2000:
        errors["description"] = ["At most 2000 characters."]
    if schema is not None:
        if problems := _schema_errors(schema):
            errors["schema"] = problems
    if example is not None:
        # An example is data the portal publishes: the limits of every event
        # (deliveries/publish/validation.py) hold for it, before a schema walks it.
        bad = json_problems(example, max_depth=settings.MAX_EVENT_DEPTH)
        if bad:
            errors["example"] = [message for _, message in bad]
    if (
        example is not None
        and schema is not None
        and "schema" not in errors
        and "example" not in errors
    ):
        validator = schema_safety.safe_validator(schema)
        problems = _data_problems(validator, example, 0)
        if problems:
            errors["example"] = [
                f"Does not match the schema at {_path_text(p.path)}: {p.message}"
                for p in problems
            ]
    return errors


def _schema_errors(schema: object) -> list[str]:
    if not isinstance(schema, dict):
        return ["A JSON Schema is a JSON object."]
    if json_depth(schema, stop_above=MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        return [f"A schema may nest at most {MAX_SCHEMA_DEPTH} levels deep."]
    if refusals := schema_checks.static_refusals(schema):
        return refusals
    try:
        schema_safety.validator_class(schema).check_schema(schema)
    except SchemaError as exc:
        return [
            f"Not a valid JSON Schema at {_path_text(exc.absolute_path)}: "
            f"{exc.message[:300]}"
        ]
    return schema_checks.probe_refusals(schema)


def event_type_create(
    *,
    name: str,
    description: str = "",
    schema: dict | None = None,
    example: object = None,
    deprecated: bool = False,
) -> EventType:
    errors = fields_errors(
        name=name, description=description, schema=schema, example=example
    )
    if not errors and EventType.objects.filter(name=name).exists():
        errors["name"] = [f"{name} is already in the catalogue."]
    if errors:
        raise ValidationError(errors)
    cache_clear()
    return EventType.objects.create(
        name=name,
        description=description,
        schema=schema,
        example=example,
        deprecated=deprecated,
    )


def event_type_update(
    *,
    event_type: EventType,
    description=_UNSET,
    schema=_UNSET,
    example=_UNSET,
    deprecated=_UNSET,
) -> EventType:
    """Change only the fields given; the example is checked against the schema
    that will be in force."""
    _refuse_reserved(event_type)
    new_schema = event_type.schema if schema is _UNSET else schema
    new_example = event_type.example if example is _UNSET else example
    errors = fields_errors(
        name=None,
        description=None if description is _UNSET else description,
        schema=new_schema,
        example=new_example,
    )
    if errors:
        raise ValidationError(errors)
    for field, value in (
        ("description", description),
        ("schema", schema),
        ("example", example),
        ("deprecated", deprecated),
    ):
        if value is not _UNSET:
            setattr(event_type, field, value if field != "description" else value or "")
    with transaction.atomic():
        event_type.save()
    cache_clear()
    return event_type


def event_type_delete(*, event_type: EventType) -> None:
    _refuse_reserved(event_type)
    event_type.delete()
    cache_clear()


def merchant_types():
    """The types a merchant can subscribe to and publish: not the relay's own."""
    return EventType.objects.exclude(name__startswith=RESERVED_PREFIX)


def catalogue_names(*, include_deprecated: bool = True) -> list[str]:
    """Names for pickers; the relay's own relay.* types are not for subscribing."""
    rows = merchant_types()
    if not include_deprecated:
        rows = rows.filter(deprecated=False)
    return list(rows.order_by("name").values_list("name", flat=True))
