"""What the database can do, asked by concern: the one place that names a backend.

PostgreSQL is the production database; SQLite runs `make run` and the quick
tests. Where the two take different paths, the code asks for the feature it
needs (percentiles in SQL, a batch as one statement, ...), so a reader sees
why the paths differ. Migrations keep their own branches: they describe the
schema of one backend at one point in time.
"""

from __future__ import annotations

from django.db import connection


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def percentiles_in_sql() -> bool:
    """percentile_cont(...) WITHIN GROUP: latency percentiles computed by the
    database; otherwise the samples are read and sorted in Python."""
    return _postgresql()


def batch_statements() -> bool:
    """Arrays as parameters (unnest, = ANY), UPDATE ... FROM and writing CTEs:
    a batch of rows read or written in one statement, one atomic step however
    many processes share the rows; otherwise the ORM, row by row."""
    return _postgresql()


def estimated_counts() -> bool:
    """EXPLAIN (FORMAT JSON) gives the planner's row estimate, for counts too
    large to make exactly."""
    return _postgresql()


def day_partitions() -> bool:
    """Tables may be partitioned by day (deliveries migration 0006)."""
    return _postgresql()


def loose_index_scans() -> bool:
    """A recursive CTE that walks an index one distinct value at a time beats
    SELECT DISTINCT, which reads every row; SQLite's DISTINCT skips by itself."""
    return _postgresql()


def row_fingerprints() -> bool:
    """md5 and string_agg over a row's text, so a cached copy of rows is checked
    in the same query that would have read them."""
    return _postgresql()


def shared_by_many_processes() -> bool:
    """Several dispatchers and web processes, on several hosts, share the
    database: NOTIFY wakes the idle ones, advisory locks order writers of one
    key, and a dispatcher may take over a silent one's rows. SQLite serves one
    dispatcher beside the web process."""
    return _postgresql()
