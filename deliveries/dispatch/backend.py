"""What the database under the dispatcher can do: one question per concern.

PostgreSQL is the production database and the only coordination point; SQLite
runs `make run`'s single dispatcher and the tests marked both_backends. A
place that does without a PostgreSQL feature asks here, by the concern's name,
so every SQLite path of one concern is one search away.
"""

from __future__ import annotations

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper


def _postgresql(conn: BaseDatabaseWrapper | None) -> bool:
    return (conn if conn is not None else connection).vendor == "postgresql"


def shared_by_dispatchers(conn: BaseDatabaseWrapper | None = None) -> bool:
    """Several dispatchers may claim and maintain at once, so claims and
    elections take locks (advisory locks, FOR UPDATE SKIP LOCKED). SQLite has
    one dispatcher and one writer at a time: nothing to lock against."""
    return _postgresql(conn)


def binds_arrays(conn: BaseDatabaseWrapper | None = None) -> bool:
    """A list binds as one array parameter (= ANY(%s), unnest), so a statement's
    text is the same whatever the list's length."""
    return _postgresql(conn)


def prepares_statements(conn: BaseDatabaseWrapper | None = None) -> bool:
    """Statements can be prepared on the server (psycopg's server-side binding)."""
    return _postgresql(conn)


def limits_sessions(conn: BaseDatabaseWrapper | None = None) -> bool:
    """A session takes timeouts as connection options (statement, lock, idle)."""
    return _postgresql(conn)


def listens(conn: BaseDatabaseWrapper | None = None) -> bool:
    """LISTEN/NOTIFY: an idle dispatcher can be woken by a publish."""
    return _postgresql(conn)


def commits_lazily(conn: BaseDatabaseWrapper | None = None) -> bool:
    """A transaction may say its commit need not wait for the disk
    (SET LOCAL synchronous_commit = off): a server crash may then lose it,
    whole, and nothing committed after it. SQLite has no such switch."""
    return _postgresql(conn)


def records_apart(conn: BaseDatabaseWrapper | None = None) -> bool:
    """A dispatcher records on a second connection while it claims on its
    first (writer.py). SQLite has one writer at a time: it records inline."""
    return _postgresql(conn)


def runs_written_sql(conn: BaseDatabaseWrapper | None = None) -> bool:
    """The claim's hot reads run as SQL written out once (claim_sql.py,
    load_sql.py), not compiled by the ORM each time. SQLite runs their ORM
    forms. On Citus a read that must name its merchant's shard keeps its own
    path (jobs._rows_per_merchant); load_sql.LIVE is the ORM form's statement
    there too (merchant_id = ANY)."""
    return _postgresql(conn)


def pipelines(conn: BaseDatabaseWrapper | None = None) -> bool:
    """Several statements can be sent before the first answer is read
    (psycopg's pipeline mode), so independent statements cost one round trip
    together (together.py)."""
    return _postgresql(conn)
