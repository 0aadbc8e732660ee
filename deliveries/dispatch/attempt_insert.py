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
    for field, name, as_is in _fields():
        values = [row.get(name, _MISSING) for row in rows]
        if _MISSING in values:
            values = [field.get_default() if v is _MISSING else v for v in values]
        if not as_is:
            values = [field.get_db_prep_save(v, connection) for v in values]
        columns.append(values)
    with prepared.statements(), connection.cursor() as cursor:
        binary = prepared.binds_on_server(cursor)
        cursor.execute(_sql(binary), columns)


# Fields whose value, of the right Python type, is what PostgreSQL is sent:
# their get_db_prep_save would only check and copy it, a call per field and
# row. The rest (JSON) go through it.
_AS_IS = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.FloatField,
    models.DateTimeField,
    models.ForeignKey,
)


_MISSING = object()


@cache
def _fields() -> tuple:
    """(field, attname, passed as is) of every column written."""
    return tuple(
        (f, f.attname, isinstance(f, _AS_IS))
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
    fields = [field for field, *_ in _fields()]
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    arrays = ", ".join(f"{mark}::{f.db_type(connection)}[]" for f in fields)
    return (
        f"INSERT INTO {connection.ops.quote_name(Attempt._meta.db_table)} ({names}) "
        f"SELECT * FROM unnest({arrays})"
    )
