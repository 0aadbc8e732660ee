"""Secrets and health carry their endpoint's merchant (the Citus distribution
column, endpoints/merchant_keyed.py); their key into the endpoint becomes
(endpoint_id, merchant_id) in migration 0013."""

import django.db.models.deletion
from django.db import migrations, models

TABLES = ("endpoints_endpointsecret", "endpoints_endpointhealth")


def backfill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(
                f"UPDATE {table} SET merchant_id = (SELECT e.merchant_id FROM "
                f"endpoints_endpoint e WHERE e.id = {table}.endpoint_id)"
            )


def merchant(null):
    return models.ForeignKey(
        db_index=False,
        null=null,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="+",
        to="endpoints.merchant",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0011_endpoint_permanent_statuses"),
    ]

    operations = [
        migrations.AlterField(
            model_name="endpointsecret",
            name="endpoint",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="secrets",
                to="endpoints.endpoint",
            ),
        ),
        migrations.AlterField(
            model_name="endpointhealth",
            name="endpoint",
            field=models.OneToOneField(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                primary_key=True,
                related_name="health",
                serialize=False,
                to="endpoints.endpoint",
            ),
        ),
        migrations.AddField("endpointsecret", "merchant", merchant(True)),
        migrations.AddField("endpointhealth", "merchant", merchant(True)),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AlterField("endpointsecret", "merchant", merchant(False)),
        migrations.AlterField("endpointhealth", "merchant", merchant(False)),
    ]
