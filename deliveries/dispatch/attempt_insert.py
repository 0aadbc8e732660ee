"""A flush's attempt rows in one prepared INSERT, its arrays bound in binary.

Django's bulk_create wrote the same rows as one INSERT ... unnest too, but
bound each column as a text-format array, which psycopg quotes element by
element (a regular expression per value): about a tenth of a millisecond of
the recording thread's Python per attempt. Here each column is one array in
binary format (no quoting) under a statement text that never changes, so a
dispatcher's session prepares it once (prepared.py). The rows come as
plain dicts, not model instances (building one per attempt was a tenth of
the recording thread's Python); the values are the ones Django would write,
and the columns every concrete field but the generated id, so a column added
to Attempt is written here too, with its default.
"""

from __future__ import annotations

import json
from functools import cache

from django.db import connection, models

from deliveries.dispatch import backend, prepared
from deliveries.models import Attempt
from endpoints.merchant_keyed import fill_merchants


def attempts_insert(rows: list[dict]) -> None:
    """Insert attempts given as {attname: value} (a field left out takes its
    default)."""
    if not rows:
        return
    if not backend.binds_arrays():
        Attempt.objects.bulk_create([Attempt(**row) for row in rows])
        return
    names = _names()
    for row in rows:
        if unknown := row.keys() - names:  # as Attempt(**row) would refuse it
            raise TypeError(f"Attempt has no field {', '.join(sorted(unknown))}")
    fill_merchants(rows)
    columns = []
    for field, name, kind in _fields():
        values = [row.get(name, _MISSING) for row in rows]
        if _MISSING in values:
            values = [field.get_default() if v is _MISSING else v for v in values]
        if kind is _JSON:
            # JSON text, cast to jsonb by the statement: what Django's
            # JSONField would send, without its adapter object per value.
            values = [None if v is None else json.dumps(v) for v in values]
        elif kind is not _AS_IS:
            values = [field.get_db_prep_save(v, connection) for v in values]
        columns.append(values)
    with prepared.statements(), connection.cursor() as cursor:
        binary = prepared.binds_on_server(cursor)
        cursor.execute(_sql(binary), columns)


# Fields whose value, of the right Python type, is what PostgreSQL is sent:
# their get_db_prep_save would only check and copy it, a call per field and
# row. JSON fields with Django's own encoder go as JSON text; any other field
# goes through get_db_prep_save.
_AS_IS_FIELDS = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.FloatField,
    models.DateTimeField,
    models.ForeignKey,
)
_AS_IS, _JSON, _PREPARED = "as is", "json", "prepared"


def _kind(field: models.Field) -> str:
    if isinstance(field, _AS_IS_FIELDS):
        return _AS_IS
    if isinstance(field, models.JSONField) and field.encoder is None:
        return _JSON
    return _PREPARED


_MISSING = object()


@cache
def _fields() -> tuple:
    """(field, attname, how its values are sent) of every column written."""
    return tuple(
        (f, f.attname, _kind(f))
        for f in Attempt._meta.concrete_fields
        if not f.primary_key
    )


@cache
def _names() -> frozenset[str]:
    return frozenset(name for _, name, _ in _fields())


@cache
def _sql(binary: bool) -> str:
    # Binary parameters need server-side binding; a session without it
    # (DB_PREPARED_STATEMENTS off) binds the same arrays as text.
    mark = "%b" if binary else "%s"
    fields = _fields()
    names = ", ".join(connection.ops.quote_name(f.column) for f, *_ in fields)
    arrays = ", ".join(
        f"{mark}::text[]::{f.db_type(connection)}[]"
        if kind is _JSON
        else f"{mark}::{f.db_type(connection)}[]"
        for f, _, kind in fields
    )
    return (
        f"INSERT INTO {connection.ops.quote_name(Attempt._meta.db_table)} ({names}) "
        f"SELECT * FROM unnest({arrays})"
    )
