"""Dispatchers declared dead: when, how often, and how many deliveries were
released from them (issue 23). Three columns on a table of one row per
dispatcher: nothing to copy."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0012_attempt_request_record"),
    ]

    operations = [
        migrations.AddField(
            model_name="dispatcherheartbeat",
            name="declared_dead_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="dispatcherheartbeat",
            name="deaths",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="dispatcherheartbeat",
            name="released",
            field=models.PositiveBigIntegerField(default=0),
        ),
    ]
