"""Primary and unique keys that include merchant_id, as Citus wants them.

A distributed table's unique constraints must contain its distribution
column (merchant_id, README "Beyond one PostgreSQL"), and a foreign key
between two distributed tables must name it on both sides. Django keeps
`id` as each model's pk (endpoints/merchant_keyed.py); in the database the
key becomes (id, merchant_id): id first, so a lookup by id alone still
reads the index on plain PostgreSQL. The keys into the endpoint (secrets,
health, watch, outbox) become (endpoint_id, merchant_id), which also checks
that a row's merchant is its endpoint's. The history tables' unique
constraints already end with their partition key (migration 0006):
merchant_id goes after it. PostgreSQL only (SQLite keeps Django's schema);
reversible.
"""

from django.db import migrations

# (table, primary key before, after)
PRIMARY_KEYS = (
    ("endpoints_endpoint", "id", "id, merchant_id"),
    ("endpoints_endpointsecret", "id", "id, merchant_id"),
    ("endpoints_endpointhealth", "endpoint_id", "endpoint_id, merchant_id"),
    ("notifications_endpointwatch", "endpoint_id", "endpoint_id, merchant_id"),
    ("notifications_outgoingemail", "id", "id, merchant_id"),
    ("deliveries_event", "id", "id, merchant_id"),
    ("deliveries_delivery", "id", "id, merchant_id"),
    ("deliveries_attempt", "id, delivery_id", "id, delivery_id, merchant_id"),
)
# (table, constraint, columns before, after)
UNIQUES = (
    (
        "deliveries_delivery",
        "delivery_unique_event_endpoint",
        "event_id, endpoint_id, id",
        "event_id, endpoint_id, id, merchant_id",
    ),
    (
        "deliveries_attempt",
        "attempt_unique_number",
        "delivery_id, number",
        "delivery_id, number, merchant_id",
    ),
)
IDEMPOTENCY_INDEX = (
    "CREATE UNIQUE INDEX event_unique_idempotency_key ON deliveries_event "
    "(idempotency_scope, idempotency_key, id{}) WHERE idempotency_key IS NOT NULL"
)
# Tables whose key into the endpoint was Django's (endpoint_id) foreign key.
INTO_ENDPOINT = (
    "endpoints_endpointsecret",
    "endpoints_endpointhealth",
    "notifications_endpointwatch",
    "notifications_outgoingemail",
)


def _fk_name(table):
    return f"{table}_endpoint_merchant_fk"


def _keys(cursor, *, keyed):
    for table in INTO_ENDPOINT:
        cursor.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {_fk_name(table)}"
        )
    for table, before, after in PRIMARY_KEYS:
        cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        columns = after if keyed else before
        cursor.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns})"
        )
    for table, name, before, after in UNIQUES:
        cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        columns = after if keyed else before
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE ({columns})")
    cursor.execute("DROP INDEX event_unique_idempotency_key")
    cursor.execute(IDEMPOTENCY_INDEX.format(", merchant_id" if keyed else ""))
    # Backwards, Django's own (endpoint_id) keys come back with the
    # reversed AlterFields of the migrations before this one.
    for table in INTO_ENDPOINT if keyed else ():
        # Deferred, as Django's own keys are: a transaction may write the
        # rows in any order.
        cursor.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {_fk_name(table)} "
            "FOREIGN KEY (endpoint_id, merchant_id) "
            "REFERENCES endpoints_endpoint (id, merchant_id) "
            "DEFERRABLE INITIALLY DEFERRED"
        )


def keyed(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            _keys(cursor, keyed=True)


def unkeyed(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            _keys(cursor, keyed=False)


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0012_merchant_columns"),
        ("deliveries", "0014_merchant_columns"),
        ("notifications", "0002_merchant_columns"),
    ]

    operations = [
        migrations.RunPython(keyed, unkeyed, elidable=False),
    ]
