"""The watch rows carry their endpoint's merchant (the Citus distribution
column, endpoints/merchant_keyed.py); the watch's and the outbox's key into
the endpoint becomes (endpoint_id, merchant_id) in endpoints 0013."""

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE notifications_endpointwatch SET merchant_id = (SELECT "
            "e.merchant_id FROM endpoints_endpoint e "
            "WHERE e.id = notifications_endpointwatch.endpoint_id)"
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
        ("notifications", "0001_initial"),
        ("endpoints", "0012_merchant_columns"),
    ]

    operations = [
        migrations.AlterField(
            model_name="endpointwatch",
            name="endpoint",
            field=models.OneToOneField(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                primary_key=True,
                related_name="watch",
                serialize=False,
                to="endpoints.endpoint",
            ),
        ),
        migrations.AlterField(
            model_name="outgoingemail",
            name="endpoint",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                to="endpoints.endpoint",
            ),
        ),
        migrations.AddField("endpointwatch", "merchant", merchant(True)),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AlterField("endpointwatch", "merchant", merchant(False)),
    ]
