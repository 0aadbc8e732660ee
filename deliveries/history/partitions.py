"""Day partitions of the history tables on PostgreSQL: made ahead, dropped whole.

The partition key is the time-ordered id (relayproject/lib/ids.py), so a row's
partition is the day it was made: events by id, deliveries by id, attempts
by delivery_id (an attempt lives in its delivery's partition). Each table
also has a DEFAULT partition: it holds whatever must outlive its day (dead
letters, pending rows, recent replays) and any row made while its day had
no partition. A delivery is made a moment after its event, so across
midnight it can land a day later: an event's day is dropped one day after
the deliveries' day, when all its deliveries have been seen.

Dropping a day (`day_drop`) is three short transactions, one per table
(attempts, deliveries, events: see DROP_ORDER): DETACH the day's partition,
copy the rows that must stay back into the parent (they land in the default
partition, since their day is gone), commit; the detached tables are then
counted and dropped outside any lock on the parents. Its
statements wait at most LOCK_TIMEOUT_MS for a lock and the transaction is
retried, so a long query on a parent never makes dispatchers queue behind a
waiting DETACH.

Why our own small module rather than django-postgres-extra or pg_partman:
neither knows that some rows of an old partition must stay (moving them is
the point here); pg_partman is a server extension this project cannot
assume, and django-postgres-extra replaces the database backend and the
models' base class for what is a few statements per day.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import TypeVar

from django.db import OperationalError, connection, transaction

from relayproject.lib import citus, dbfeatures
from relayproject.lib.ids import id_floor

logger = logging.getLogger(__name__)

AHEAD_DAYS = 7  # days of empty partitions kept ready after today
LOCK_TIMEOUT_MS = 100  # longest a DDL statement waits for a lock, per try
LOCK_TRIES = 50  # a prune keeps trying for about half a minute

T = TypeVar("T")


@dataclass(frozen=True)
class History:
    """A partitioned history table, its key column and the key's id prefix."""

    table: str
    column: str
    prefix: str

    def partition(self, day: date) -> str:
        return f"{self.table}_p{day:%Y%m%d}"

    @property
    def default(self) -> str:
        return f"{self.table}_default"

    def bound(self, day: date) -> str:
        """SQL literal: the lowest key of a row made on `day`."""
        return f"'{id_floor(self.prefix, day_start(day))}'"


EVENTS = History("deliveries_event", "id", "evt")
DELIVERIES = History("deliveries_delivery", "id", "dlv")
ATTEMPTS = History("deliveries_attempt", "delivery_id", "dlv")
# Locks are taken in the order writers take them (publish: event then
# delivery; record: delivery then attempt), so DDL and writers never deadlock.
TABLES = (EVENTS, DELIVERIES, ATTEMPTS)

_DAY = re.compile(r"_p(\d{8})\Z")  # \Z: $ would pass a name ending in a newline


@dataclass
class DayDropped:
    day: date
    deliveries: int = 0
    attempts: int = 0
    events: int = 0
    kept_deliveries: int = 0
    partitions: int = 0


def day_start(day: date) -> datetime:
    return datetime.combine(day, dtime.min, tzinfo=UTC)


def partitioned() -> bool:
    """True on PostgreSQL once migration 0006 has partitioned the tables."""
    if not dbfeatures.day_partitions():
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)",
            [DELIVERIES.table],
        )
        row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def partition_days(history: History) -> list[date]:
    """The days that have an attached partition, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [history.table],
        )
        names = [name for (name,) in cursor.fetchall()]
    days = []
    for name in names:
        match = _DAY.search(name)
        if match:
            days.append(datetime.strptime(match.group(1), "%Y%m%d").date())
    return sorted(days)


class LockBusy(Exception):
    """The tables stayed locked through every try; nothing was changed."""


def _briefly_locked(step: Callable[[], T], *, tries: int = LOCK_TRIES) -> T:
    """Run `step` in a transaction whose lock waits are short; retry on timeout."""
    for attempt in range(tries):
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
                return step()
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "55P03":
                raise
            if attempt == tries - 1:
                raise LockBusy(str(exc).strip()) from exc
            # Someone holds the table: back off, let the queue drain, try again.
            time.sleep(random.uniform(0.02, 0.1) * min(attempt + 1, 10))
    raise AssertionError("unreachable")


def partitions_ensure(*, first: date, last: date, tries: int = LOCK_TRIES) -> list[str]:
    """Make sure every table has a partition for each day in [first, last].

    A new partition is built beside the table and then ATTACHed, which locks
    the parent only in SHARE UPDATE EXCLUSIVE mode (claims and inserts go
    on); rows of that day already in the default partition move into it.
    """
    created = []
    for history in TABLES:
        have = set(partition_days(history))
        day = first
        while day <= last:
            if day not in have:
                _briefly_locked(lambda h=history, d=day: _attach(h, d), tries=tries)
                created.append(history.partition(day))
            day += timedelta(days=1)
    if created:
        logger.info("created partitions %s", ", ".join(created))
    return created


def _attach(history: History, day: date) -> None:
    name, column = history.partition(day), history.column
    low, high = history.bound(day), history.bound(day + timedelta(days=1))
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {name} "
            f"(LIKE {history.table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        )
        # Lets ATTACH skip scanning the new table for rows out of range.
        cursor.execute(
            f"ALTER TABLE {name} ADD CONSTRAINT {name}_range "
            f"CHECK ({column} >= {low} AND {column} < {high})"
        )
        if _distributed(history):
            # Citus attaches only a partition distributed as its parent is:
            # by merchant, in the parent's co-location group. One connection
            # per node for the rest of the transaction: with several, the
            # copy's and the ATTACH's shard locks wait on each other and
            # Citus cancels it as a distributed deadlock.
            cursor.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
            cursor.execute(
                "SELECT create_distributed_table(%s, 'merchant_id', colocate_with => %s)",
                [name, history.table],
            )
        cursor.execute(
            f"WITH moved AS (DELETE FROM {history.default} "
            f"WHERE {column} >= {low} AND {column} < {high} RETURNING *) "
            f"INSERT INTO {name} SELECT * FROM moved"
        )
        cursor.execute(
            f"ALTER TABLE {history.table} ATTACH PARTITION {name} "
            f"FOR VALUES FROM ({low}) TO ({high})"
        )


def _distributed(history: History) -> bool:
    """Whether Citus distributes `history` (citus_distribute has run)."""
    if not citus.on():
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = %s::regclass",
            [history.table],
        )
        return cursor.fetchone() is not None


def kept_deliveries(*, before: date, include_dead: bool) -> str:
    """SQL condition: a delivery row that a prune up to `before` must keep.

    Written as an OR of what the partial indexes cover (due, succeeded,
    dead), so counting the kept rows never scans a whole day.
    """
    bound = f"'{day_start(before).isoformat()}'"
    dead = f"(dead_at IS NULL OR dead_at >= {bound})" if include_dead else "TRUE"
    return (
        "(status IN ('pending', 'delivering') "
        # Waiting in an ordered lane (deliveries/lanes.py): unfinished too.
        "OR status = 'waiting' "
        "OR (status = 'succeeded' "
        f"AND (succeeded_at IS NULL OR succeeded_at >= {bound})) "
        f"OR (status = 'dead' AND {dead}))"
    )


def rows_before(history: History, *, day: date) -> tuple[int, bool]:
    """Rows in `history`'s day partitions before `day` and in its default
    partition below `day`'s bound: (count, whether any part is an estimate).

    A day partition that was analyzed counts by its statistics (pg_class
    reltuples, what autovacuum keeps), so this stays cheap at millions of
    rows; one never analyzed is counted.
    """
    total, estimated = 0, False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.reltuples FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
            [history.table],
        )
        for name, reltuples in cursor.fetchall():
            match = _DAY.search(name)
            if not match or datetime.strptime(match[1], "%Y%m%d").date() >= day:
                continue
            if reltuples >= 0:
                total, estimated = total + int(reltuples), True
                continue
            cursor.execute(f"SELECT count(*) FROM {name}")
            total += cursor.fetchone()[0]
        cursor.execute(
            f"SELECT count(*) FROM {history.default} "
            f"WHERE {history.column} < {history.bound(day)}"
        )
        total += cursor.fetchone()[0]
    return total, estimated


def _dropped_with(day: date) -> dict[History, date]:
    """The partitions `day_drop(day)` takes: an event's day goes a day late."""
    return {EVENTS: day - timedelta(days=1), DELIVERIES: day, ATTEMPTS: day}


def days_to_drop(*, before: date) -> list[date]:
    """The days whose partitions a prune up to `before` drops, oldest first."""
    days: set[date] = set()
    for history in TABLES:
        lag = _dropped_with(before)[history] - before  # zero, or minus a day
        days.update(d - lag for d in partition_days(history) if d - lag < before)
    return sorted(days)


# Which rows of a detached day stay: a delivery by kept_deliveries; an
# attempt when its delivery stays; an event while any delivery refers to it
# (by then its deliveries' days are gone: what is left of them stayed). The
# deliveries are looked up in the parent table by id range: an attempt is in
# its delivery's day, an event's deliveries are in its day or the next.
# (key, deliveries' column, days of deliveries, only the kept ones). Matched
# with the merchant too, which changes no answer and lets Citus run the copy
# on each shard (a distributed table's rows meet only on merchant_id there).
_STAYS_WITH = {
    ATTEMPTS: ("t.delivery_id", "id", 1, True),
    EVENTS: ("t.id", "event_id", 2, False),
}
# Attempts go first and events last, each table in its own transaction, so
# at every commit in between each attempt's delivery and each delivery's
# event are still there; and a claim (which writes deliveries only) waits
# for the deliveries' own copy, not for the attempts' and events'.
DROP_ORDER = (ATTEMPTS, DELIVERIES, EVENTS)


def _detach_and_keep(
    history: History, *, day: date, before: date, include_dead: bool
) -> tuple[int, float] | None:
    """DETACH `history`'s partition of `day`'s drop and copy back its rows
    that stay, in the caller's transaction: how many stayed and how long the
    table was locked, from asking for the lock (None: no partition)."""
    own_day = _dropped_with(day)[history]
    if own_day not in partition_days(history):
        return None
    name = history.partition(own_day)
    kept = kept_deliveries(before=before, include_dead=include_dead)
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {history.table} DETACH PARTITION {name}")
        if history is DELIVERIES:
            cursor.execute(
                f"INSERT INTO {history.table} SELECT * FROM {name} WHERE {kept}"
            )
        else:
            key, column, days, only_kept = _STAYS_WITH[history]
            low = DELIVERIES.bound(own_day)
            high = DELIVERIES.bound(own_day + timedelta(days=days))
            which = f" AND {kept}" if only_kept else ""
            cursor.execute(
                f"INSERT INTO {history.table} SELECT t.* FROM {name} t "
                f"WHERE ({key}, t.merchant_id) IN (SELECT {column}, merchant_id "
                f"FROM {DELIVERIES.table} WHERE id >= {low} AND id < {high}{which})"
            )
        return cursor.rowcount, (time.monotonic() - started) * 1000


def day_drop(*, day: date, before: date, include_dead: bool) -> DayDropped:
    """Drop one day of history, keeping the rows that must stay (see module doc)."""
    kept: dict[History, int] = {}
    held: list[str] = []
    for history in DROP_ORDER:
        started = time.monotonic()
        outcome = _briefly_locked(
            lambda h=history: _detach_and_keep(
                h, day=day, before=before, include_dead=include_dead
            )
        )
        if outcome is not None:
            kept[history], held_ms = outcome
            tried_ms = (time.monotonic() - started) * 1000
            held.append(
                f"{history.table} {held_ms:.0f} ms ({tried_ms:.0f} with retries)"
            )
    # Outside the parents' locks: count what went, then drop the tables.
    gone: dict[History, int] = {}
    with connection.cursor() as cursor:
        for history, stayed in kept.items():
            name = history.partition(_dropped_with(day)[history])
            cursor.execute(f"SELECT count(*) FROM {name}")
            gone[history] = cursor.fetchone()[0] - stayed
            cursor.execute(f"DROP TABLE {name}")
    dropped = DayDropped(
        day=day,
        deliveries=gone.get(DELIVERIES, 0),
        attempts=gone.get(ATTEMPTS, 0),
        events=gone.get(EVENTS, 0),
        kept_deliveries=kept.get(DELIVERIES, 0),
        partitions=len(kept),
    )
    logger.info(
        "dropped %d partitions of %s: %d deliveries, %d attempts, %d events "
        "(%d deliveries kept; locked for the detach and copy: %s)",
        dropped.partitions,
        day,
        dropped.deliveries,
        dropped.attempts,
        dropped.events,
        dropped.kept_deliveries,
        ", ".join(held),
    )
    return dropped
