"""Citus, when the database is a Citus coordinator: what is distributed how.

The relay's tables fall in three kinds (docs/pages/operations/scaling.md):

- distributed by merchant_id and co-located: every row that belongs to one
  merchant (endpoints/merchant_keyed.py), so a statement that names the
  merchant runs on one shard, and a merchant's event, deliveries, attempts,
  endpoints and health rows are on the same one;
- reference tables, copied to every node: small tables every merchant's
  statements read (the merchants themselves, the event-type catalogue, API
  keys, portal links), so a shard joins them locally;
- local tables on the coordinator: Django's own (auth, sessions, admin log,
  axes) and the relay's per-process rows (dispatcher heartbeats, counter
  shards, maintenance slots, analysis snapshots), none of them per merchant.

Nothing here runs on plain PostgreSQL or SQLite: `active()` says so first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

REFERENCE = (
    "endpoints_merchant",
    "endpoints_eventtype",
    "endpoints_apikey",
    "endpoints_portallink",
)
# In the order they are distributed: a table's foreign keys point at tables
# before it. The first one is the co-location group's anchor.
DISTRIBUTED = (
    "endpoints_endpoint",
    "endpoints_endpointsecret",
    "endpoints_endpointhealth",
    "notifications_notificationsettings",
    "notifications_notificationaddress",
    "notifications_mailquota",
    "notifications_endpointwatch",
    "notifications_outgoingemail",
    "deliveries_publishbucket",
    "deliveries_event",
    "deliveries_delivery",
    "deliveries_attempt",
)
COLUMN = "merchant_id"


def note_connection(sender, connection, **kwargs) -> None:
    """connection_created: remember whether this database has Citus.

    Through psycopg's own cursor, so no statement count (the round-trip
    tests') ever sees it; once per connection, not per statement.
    """
    found = False
    if connection.vendor == "postgresql":
        with connection.connection.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
            )
            found = cursor.fetchone()[0]
    connection.relay_citus = found


def on() -> bool:
    """Whether the hot statements must name their shard (a Citus database):
    what note_connection found, without a query."""
    connection.ensure_connection()
    return getattr(connection, "relay_citus", False)


def active() -> bool:
    """True when the default database is a Citus coordinator."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
        return cursor.fetchone() is not None


def distributed() -> bool:
    """True once citus_distribute has distributed the deliveries."""
    return active() and "deliveries_delivery" in _kinds()


@dataclass
class Cluster:
    version: str
    workers: int
    distributed: int  # of DISTRIBUTED
    reference: int  # of REFERENCE

    def as_dict(self) -> dict:
        return {
            "version": self.version,
            "workers": self.workers,
            "distributed_tables": self.distributed,
            "reference_tables": self.reference,
        }


def cluster() -> Cluster | None:
    """The cluster's shape, or None on a database without Citus."""
    if not active():
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
        version = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM citus_get_active_worker_nodes()")
        workers = cursor.fetchone()[0]
    kinds = _kinds()
    return Cluster(
        version=version,
        workers=workers,
        distributed=sum(kinds.get(t) == "h" for t in DISTRIBUTED),
        reference=sum(kinds.get(t) == "n" for t in REFERENCE),
    )


def _kinds() -> dict[str, str]:
    """Table name -> Citus partition method ('h' hash, 'n' reference)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT logicalrelid::regclass::text, partmethod FROM pg_dist_partition"
        )
        return dict(cursor.fetchall())


@dataclass
class Distributed:
    """What one citus_distribute run did."""

    reference: list[str] = field(default_factory=list)
    distributed: list[str] = field(default_factory=list)
    dropped_keys: list[str] = field(default_factory=list)  # local -> distributed
    readded_keys: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.reference or self.distributed or self.dropped_keys)


def _foreign_keys(cursor, tables: set[str]) -> list[tuple[str, str, str, str]]:
    """(table, referenced table, name, definition) of every foreign key from
    or into `tables`, on parent tables only (partitions inherit theirs)."""
    cursor.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text, conname, "
        "pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE contype = 'f' AND conparentid = 0 "
        "AND (conrelid::regclass::text = ANY(%s) OR confrelid::regclass::text = ANY(%s))",
        [sorted(tables), sorted(tables)],
    )
    return cursor.fetchall()


def _leaves(cursor, table: str) -> list[str]:
    cursor.execute(
        "SELECT relid::regclass::text FROM pg_partition_tree(%s::regclass)", [table]
    )
    return [name for (name,) in cursor.fetchall()]


def distribute(*, shard_count: int | None = None) -> Distributed:
    """Make the reference and distributed tables (idempotent: a table that
    already is one is left alone). In one transaction: all or nothing.

    Citus checks every foreign key as a table is converted, and a key from a
    table still local into one being converted makes it convert the local
    one too (with its partitions, whose copies it then finds inconsistent).
    So the keys between the relay's tables are dropped first and added back
    once both ends are distributed; a key from a table that stays local
    (memberships -> merchants) cannot exist on Citus and is dropped for good:
    the ORM deletes memberships with their merchant all the same.
    """
    done = Distributed()
    planned = set(REFERENCE) | set(DISTRIBUTED)
    kinds = _kinds()
    todo = [t for t in (*REFERENCE, *DISTRIBUTED) if t not in kinds]
    if not todo:
        return done
    with connection.cursor() as cursor:
        # Keys into reference tables make Citus use one connection per node
        # for the rest of the transaction; it must know before the first copy.
        cursor.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        keys = [
            key
            for key in _foreign_keys(cursor, planned)
            if key[0] in todo or key[1] in todo
        ]
        for table, _, name, _ in keys:
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        for table in REFERENCE:
            if table in todo:
                cursor.execute("SELECT create_reference_table(%s)", [table])
                _drop_local_copy(cursor, table)
                done.reference.append(table)
        for table in DISTRIBUTED:
            if table in todo and table == DISTRIBUTED[0]:
                # The group's anchor sets the shard count (Citus's
                # citus.shard_count, 32, unless given); the rest follow it.
                cursor.execute(
                    "SELECT create_distributed_table(%s, %s, shard_count => %s)",
                    [table, COLUMN, shard_count or _default_shard_count(cursor)],
                )
            elif table in todo:
                cursor.execute(
                    "SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                    [table, COLUMN, DISTRIBUTED[0]],
                )
            if table in todo:
                _drop_local_copy(cursor, table)
                done.distributed.append(table)
        for table, referenced, name, definition in keys:
            if table in planned and referenced in planned:
                cursor.execute(
                    f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'
                )
                done.readded_keys.append(f"{table}.{name}")
            else:
                done.dropped_keys.append(f"{table}.{name}")
    return done


def _default_shard_count(cursor) -> int:
    cursor.execute("SHOW citus.shard_count")
    return int(cursor.fetchone()[0])


def _drop_local_copy(cursor, table: str) -> None:
    # create_*_table copies the rows into shards and leaves the coordinator's
    # own copy on disk, invisible; an ATTACH PARTITION would later check it.
    for leaf in _leaves(cursor, table):
        cursor.execute(
            "SELECT truncate_local_data_after_distributing_table(%s)", [leaf]
        )
