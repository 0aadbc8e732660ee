"""Fewer indexes to write per event and delivery published (issue 14).

Every index of a row is written when the row is; a publish writes an event
and one delivery per endpoint. These were redundant: Django's own index on
each foreign key (delivery.event, delivery.endpoint, event.merchant), led
by a wider index already, and on PostgreSQL the `varchar_pattern_ops`
copies it adds for LIKE on the character keys (`id`, `event_id`,
`endpoint_id`), which no query uses: ids are looked up whole. Deliveries go
from 17 indexes to 12, events from 7 to 5.
"""

import django.db.models.deletion
from django.db import migrations, models

# The primary keys' LIKE indexes: no field option removes them.
LIKE_INDEXED = (("deliveries_delivery", "id"), ("deliveries_event", "id"))


def _like_names(schema_editor):
    for table, column in LIKE_INDEXED:
        name = schema_editor._create_index_name(table, [column], suffix="_like")
        yield table, column, name


def drop_like_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for _, _, name in _like_names(schema_editor):
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def create_like_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, column, name in _like_names(schema_editor):
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON {table} '
            f"({column} varchar_pattern_ops)"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0009_analysis_snapshot"),
    ]

    operations = [
        migrations.AlterField(
            model_name="delivery",
            name="endpoint",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="endpoints.endpoint",
            ),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="event",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="deliveries.event",
            ),
        ),
        migrations.AlterField(
            model_name="event",
            name="merchant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="endpoints.merchant",
            ),
        ),
        migrations.RunPython(drop_like_indexes, create_like_indexes),
    ]
