"""Statements sent to PostgreSQL together, answered in one round trip.

A dispatcher's writer waits for each statement's answer, and once the
answer is in, for the GIL (the send loop and the claiming thread hold it in
turns), so every round trip a flush saves is a wait of a few milliseconds
saved at thousands of deliveries a second. Statements whose arguments do not
depend on each other's results go inside one sent_together() block: psycopg's
pipeline mode sends them all, then the block's end reads every answer.

Never inside a transaction holding a lock another dispatcher may want (the
claim's merchant locks): psycopg sends each statement as it is executed and
the pipeline's Sync at the block's end, and PostgreSQL starts a session's
idle-in-transaction timeout only once it has answered a Sync. A dispatcher
stopped (SIGSTOP, a paused VM) between the two would hold the lock for as
long as it stays stopped, not DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS
(tests/deliveries/dispatch/test_claim_freeze.py). The writer's pipeline
holds only its own leased rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from deliveries.dispatch import backend


@contextmanager
def sent_together() -> Iterator[None]:
    """Statements executed inside are sent at once and answered by the block's
    end: fetch their results after it, from cursors still open.

    PostgreSQL runs them one after the other, in the order sent, each with
    its own snapshot under READ COMMITTED, as if sent apart. The first that
    fails skips the rest, and its error is raised at the block's end as the
    Django error it would have been. Elsewhere (SQLite) each statement runs as
    it is executed, and the results read after the block are the same."""
    if not backend.pipelines():
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield
