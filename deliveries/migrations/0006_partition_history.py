"""History tables range-partitioned by day on PostgreSQL; SQLite keeps plain tables.

The partition key is the time-ordered id (relayproject/lib/ids.py: its first
characters are the creation time in milliseconds, in byte order): events by
id, deliveries by id, attempts by delivery_id, so an attempt lives in its
delivery's partition. Partitioning on the primary key keeps `id` the
primary key in the database as in Django, and lets every lookup by id (the
claim's and the record's UPDATEs, the pages) touch one partition.
PostgreSQL wants every unique constraint of a partitioned table to include
the partition key: the attempt's primary key becomes (id, delivery_id), and
unique constraints gain the key column (the idempotency key is therefore
looked up under its advisory lock, deliveries/publish/ingest.py). Foreign keys INTO
a partitioned table would make detaching a partition check every reference,
so delivery.event and attempt.delivery become db_constraint=False: the code
that deletes (deliveries.history.retention) keeps them whole.

The data migration copies the rows of today's tables into the partitioned
ones (one partition per day that has rows, today and tomorrow, and a
default partition that takes any id outside them), then swaps the names;
indexes and constraints are recreated with the names Django knows them by.
It runs in the migration's transaction, so a failure leaves the old tables
as they were. Reversible.
"""

import re
from datetime import datetime, time, timedelta, timezone

import django.db.models.deletion
from django.db import migrations, models

from relayproject.lib.ids import id_floor

# (table, partition key, id prefix of the key, the time column that dates a row)
TABLES = (
    ("deliveries_event", "id", "evt", "created_at"),
    ("deliveries_delivery", "id", "dlv", "created_at"),
    ("deliveries_attempt", "delivery_id", "dlv", "started_at"),
)
# Today and tomorrow; the dispatchers' maintenance makes the rest of the
# week ahead at their first round (deliveries.history.partitions.AHEAD_DAYS).
AHEAD_DAYS = 1


def _rows(cursor, sql, params=()):
    cursor.execute(sql, params)
    return cursor.fetchall()


def _definitions(cursor, table):
    """Foreign keys, unique constraints and indexes of `table`, by name."""
    constraints = _rows(
        cursor,
        "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('f', 'u')",
        [table],
    )
    owned = {name for name, _, _ in constraints} | {f"{table}_pkey"}
    indexes = [
        (name, definition)
        for name, definition in _rows(
            cursor,
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE schemaname = current_schema() AND tablename = %s",
            [table],
        )
        if name not in owned
    ]
    return constraints, indexes


def _with_key(columns, key, partitioned):
    """A unique column list with the partition key appended (or taken off)."""
    parts = [c.strip() for c in columns.split(",")]
    if partitioned:
        return ", ".join(parts if key in parts else [*parts, key])
    # Only this migration appends the key last (no unique list before it ends
    # with it), so a trailing key is the one to take off.
    return ", ".join(parts[:-1] if len(parts) > 1 and parts[-1] == key else parts)


def _recreate(cursor, table, key, constraints, indexes, partitioned):
    for name, kind, definition in constraints:
        if kind == "u":
            columns = re.fullmatch(r"UNIQUE \((.*)\)", definition).group(1)
            definition = f"UNIQUE ({_with_key(columns, key, partitioned)})"
        cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    for _, definition in indexes:
        if definition.startswith("CREATE UNIQUE INDEX"):
            definition = re.sub(
                r"USING btree \(([^)]*)\)",
                lambda m: f"USING btree ({_with_key(m.group(1), key, partitioned)})",
                definition,
                count=1,
            )
        cursor.execute(definition)


def _days_with_rows(cursor, table, dated_by):
    return [
        day
        for (day,) in _rows(
            cursor,
            f"SELECT DISTINCT date_trunc('day', {dated_by} AT TIME ZONE 'UTC')::date "
            f"FROM {table}",
        )
    ]


def _bound(prefix, day):
    return id_floor(prefix, datetime.combine(day, time.min, tzinfo=timezone.utc))


def _convert(cursor, table, key, prefix, dated_by, *, partitioned):
    """Copy `table` into a new (partitioned or plain) table and swap names."""
    new = f"{table}__new"
    constraints, indexes = _definitions(cursor, table)
    cursor.execute(
        f"CREATE TABLE {new} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        + (f" PARTITION BY RANGE ({key})" if partitioned else "")
    )
    id_type = _rows(
        cursor,
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s "
        "AND column_name = 'id'",
        [table],
    )[0][0]
    sequence = None
    if id_type == "bigint":
        # Identity columns are not allowed on partitioned tables before
        # PostgreSQL 17: the attempt id takes its values from a sequence.
        sequence = f"{table}_id_seq"
        cursor.execute(f"CREATE SEQUENCE {new}_id_seq")
        cursor.execute(
            f"ALTER TABLE {new} ALTER COLUMN id SET DEFAULT nextval('{new}_id_seq')"
        )
    if partitioned:
        primary_key = "id" if key == "id" else f"id, {key}"
        cursor.execute(f"ALTER TABLE {new} ADD PRIMARY KEY ({primary_key})")
        cursor.execute(f"CREATE TABLE {table}_default PARTITION OF {new} DEFAULT")
        today = datetime.now(timezone.utc).date()
        days = set(_days_with_rows(cursor, table, dated_by))
        days |= {today + timedelta(days=n) for n in range(AHEAD_DAYS + 1)}
        for day in sorted(days):
            cursor.execute(
                f"CREATE TABLE {table}_p{day:%Y%m%d} PARTITION OF {new} "
                f"FOR VALUES FROM ('{_bound(prefix, day)}') "
                f"TO ('{_bound(prefix, day + timedelta(days=1))}')"
            )
    else:
        cursor.execute(f"ALTER TABLE {new} ADD PRIMARY KEY (id)")
    cursor.execute(f"INSERT INTO {new} SELECT * FROM {table}")
    if sequence:
        cursor.execute(
            f"SELECT setval('{new}_id_seq', COALESCE((SELECT max(id) FROM {new}), 0) + 1, false)"
        )
    cursor.execute(f"DROP TABLE {table}")
    cursor.execute(f"ALTER TABLE {new} RENAME TO {table}")
    cursor.execute(f"ALTER TABLE {table} RENAME CONSTRAINT {new}_pkey TO {table}_pkey")
    if sequence:
        cursor.execute(f"ALTER SEQUENCE {new}_id_seq RENAME TO {sequence}")
        cursor.execute(f"ALTER SEQUENCE {sequence} OWNED BY {table}.id")
    if not partitioned:
        # Leave the partitions of the copied table behind: drop them.
        for (name,) in _rows(
            cursor,
            "SELECT relname FROM pg_class WHERE relname LIKE %s AND relkind = 'r'",
            [f"{table}\\_p%"],
        ):
            cursor.execute(f"DROP TABLE IF EXISTS {name}")
    _recreate(cursor, table, key, constraints, indexes, partitioned)


def _is_partitioned(cursor, table):
    return _rows(cursor, "SELECT relkind FROM pg_class WHERE oid = %s::regclass", [table])[0][0] == "p"


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, key, prefix, dated_by in TABLES:
            if not _is_partitioned(cursor, table):
                _convert(cursor, table, key, prefix, dated_by, partitioned=True)


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, key, prefix, dated_by in TABLES:
            if _is_partitioned(cursor, table):
                _convert(cursor, table, key, prefix, dated_by, partitioned=False)


class Migration(migrations.Migration):

    dependencies = [
        ("deliveries", "0005_dispatcher_heartbeat"),
    ]

    operations = [
        migrations.AlterField(
            model_name="delivery",
            name="event",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="deliveries.event",
            ),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="delivery",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="attempts",
                to="deliveries.delivery",
            ),
        ),
        migrations.RunPython(partition, unpartition, elidable=False),
    ]
