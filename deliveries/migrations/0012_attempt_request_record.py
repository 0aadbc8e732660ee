"""Each attempt keeps what it sent and got back: URL, request headers (secrets
as fingerprints), response headers.

Nullable columns without a default: on the day-partitioned attempts table
(migration 0006) PostgreSQL adds them to the parent and every partition as a
catalogue change, rewriting no row; older attempts read null ("not recorded").
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0011_publish_bucket'),
    ]

    operations = [
        migrations.AddField(
            model_name='attempt',
            name='request_headers',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='attempt',
            name='request_url',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='attempt',
            name='response_headers',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
