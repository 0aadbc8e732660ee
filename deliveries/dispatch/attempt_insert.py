"""A flush's attempt rows in one prepared INSERT, its arrays bound in binary.

Django's bulk_create wrote the same rows as one INSERT ... unnest too, but
bound each column as a text-format array, which psycopg quotes element by
element (a regular expression per value): about a tenth of a millisecond of
the recording thread's Python per attempt. Here each column is one array in
binary format (no quoting) under a statement text that never changes, so a
dispatcher's session prepares it once (prepared.py). The values are the
ones Django would write (each field's own get_db_prep_save), the columns
every concrete field but the generated id, so a column added to Attempt is
written here too.
"""

from __future__ import annotations

from functools import cache

from django.db import connection

from deliveries.dispatch import backend, prepared
from deliveries.models import Attempt
from endpoints.merchant_keyed import fill_merchants


def attempts_insert(attempts: list[Attempt]) -> None:
    if not attempts:
        return
    if not backend.binds_arrays():
        Attempt.objects.bulk_create(attempts)
        return
    fill_merchants(attempts)
    fields = _fields()
    columns = [
        [f.get_db_prep_save(getattr(a, f.attname), connection) for a in attempts]
        for f in fields
    ]
    with prepared.statements(), connection.cursor() as cursor:
        binary = prepared.binds_on_server(cursor)
        cursor.execute(_sql(binary), columns)


@cache
def _fields() -> tuple:
    return tuple(f for f in Attempt._meta.concrete_fields if not f.primary_key)


@cache
def _sql(binary: bool) -> str:
    # Binary parameters need server-side binding; a session without it
    # (DB_PREPARED_STATEMENTS off) binds the same arrays as text.
    mark = "%b" if binary else "%s"
    fields = _fields()
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    arrays = ", ".join(f"{mark}::{f.db_type(connection)}[]" for f in fields)
    return (
        f"INSERT INTO {connection.ops.quote_name(Attempt._meta.db_table)} ({names}) "
        f"SELECT * FROM unnest({arrays})"
    )
