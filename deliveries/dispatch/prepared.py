"""The dispatcher's hot statements, prepared once per session on PostgreSQL.

Planning a statement over the partitioned deliveries table (a partition a
day, each with its indexes) costs PostgreSQL several milliseconds, up to tens
on a busy machine, where running the claim's index probes takes one or two.
A dispatcher runs the same few statements many times a second, so inside
statements() they bind their parameters on the server and psycopg prepares
each one once it has run PREPARE_THRESHOLD times on the session: from then on
PostgreSQL reuses its plan instead of planning again.

Only run_dispatcher's own sessions opt in (session.py sets the threshold);
elsewhere, and on SQLite, statements() changes nothing. Django's own cursors
bind on the client and never prepare, so nothing outside these blocks is
affected. Only statements whose text does not change with their arguments
belong inside: lists go in as one array (`field__any=ids`, below), not
IN (%s, %s, ...). A text that varies (a bulk INSERT of n rows) would be
prepared anew for each n, at a round trip each, and push the others out of
psycopg's cache of 100 (a DEALLOCATE each).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Field, ForeignObject, Lookup

from deliveries.dispatch import backend

# Runs of the same statement on a session before psycopg prepares it.
PREPARE_THRESHOLD = 2


@contextmanager
def statements() -> Iterator[None]:
    """Inside, the ORM and raw cursors of this thread's default connection bind
    on the server, so repeated statements are prepared (where opted in)."""
    if not backend.prepares_statements():
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:  # not a dispatcher session
        yield
        return
    from django.db.backends.postgresql.base import ServerBindingCursor

    before = raw.cursor_factory
    raw.cursor_factory = ServerBindingCursor
    try:
        yield
    finally:
        raw.cursor_factory = before


class AnyOf(Lookup):
    """`field__any=values`: `field IN values`, written on PostgreSQL as
    `= ANY(%s)` with the list as one array, so that the statement's text is
    the same whatever the list's length and one prepared statement serves."""

    lookup_name = "any"
    prepare_rhs = False

    def as_sql(self, compiler, conn):
        lhs, lhs_params = self.process_lhs(compiler, conn)
        values = list(self.rhs)
        if backend.binds_arrays(conn):
            return f"{lhs} = ANY(%s)", [*lhs_params, values]
        if not values:
            raise EmptyResultSet
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [
            *lhs_params,
            *values,
        ]


Field.register_lookup(AnyOf)
ForeignObject.register_lookup(AnyOf)  # foreign keys look their lookups up apart


def binds_on_server(cursor) -> bool:
    """Whether this Django cursor binds its parameters on the server (inside
    statements(), on a dispatcher's session), where binary ones are allowed."""
    import psycopg

    return not isinstance(cursor.cursor, psycopg.ClientCursor)
