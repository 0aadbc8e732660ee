"""Between transactional tests on plain PostgreSQL: DELETE every table, not TRUNCATE.

pytest-django empties the database after each `transaction=True` test with
Django's flush, one TRUNCATE of every table: 0.22 s here, nearly all of it
PostgreSQL making new files for some sixty tables, day partitions and their
indexes, and paid after more than a thousand tests a run. At that point the
tables hold a few rows, which DELETE removes in milliseconds. Every foreign
key is DEFERRABLE (Django's, and the relay's own), so in one transaction the
order does not matter: they are checked at its commit, with every table
empty. Tables whose planner statistics still count rows are analysed, so the
next test starts from estimates of zero, as after a TRUNCATE.

Django's own TRUNCATE stays for what DELETE would change: sequences to reset,
a cascade to tables outside the list, and Citus.
"""

from __future__ import annotations

from django.db.backends.postgresql.operations import DatabaseOperations

_truncate = DatabaseOperations.sql_flush

_ANALYZE_COUNTED = """
DO $$
DECLARE t regclass;
BEGIN
    FOR t IN
        SELECT c.oid::regclass FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.reltuples > 0
    LOOP
        EXECUTE format('ANALYZE %s', t);
    END LOOP;
END
$$
"""


def _delete_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    if (
        not tables
        or reset_sequences
        or allow_cascade
        or getattr(self.connection, "relay_citus", False)
    ):
        return _truncate(
            self,
            style,
            tables,
            reset_sequences=reset_sequences,
            allow_cascade=allow_cascade,
        )
    deletes = [
        f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))}"
        for t in sorted(tables)
    ]
    return ["SET CONSTRAINTS ALL DEFERRED", *deletes, _ANALYZE_COUNTED]


def install() -> None:
    DatabaseOperations.sql_flush = _delete_flush
