"""Deliveries and attempts carry their endpoint's merchant (the Citus
distribution column, endpoints/merchant_keyed.py). The history tables keep
no foreign key at all: Citus cannot add one to a partitioned table once it
is distributed, and a publish checks none (the code keeps them whole, see
migration 0006). On PostgreSQL the backfill rewrites every row once."""

import django.db.models.deletion
from django.db import migrations, models

TABLES = ("deliveries_delivery", "deliveries_attempt")


def backfill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(
                f"UPDATE {table} SET merchant_id = (SELECT e.merchant_id FROM "
                f"endpoints_endpoint e WHERE e.id = {table}.endpoint_id)"
            )


def merchant(null):
    return models.ForeignKey(
        db_constraint=False,
        db_index=False,
        null=null,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="+",
        to="endpoints.merchant",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0013_heartbeat_deaths"),
        ("endpoints", "0012_merchant_columns"),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="merchant",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="endpoints.merchant",
            ),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="endpoint",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="endpoints.endpoint",
            ),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="endpoint",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="attempts",
                to="endpoints.endpoint",
            ),
        ),
        migrations.AddField("delivery", "merchant", merchant(True)),
        migrations.AddField("attempt", "merchant", merchant(True)),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AlterField("delivery", "merchant", merchant(False)),
        migrations.AlterField("attempt", "merchant", merchant(False)),
    ]
