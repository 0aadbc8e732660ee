"""Per-endpoint statuses that end a delivery at once (empty: retry every
non-2xx but 410). The endpoints table is small and not partitioned; the
constant default is stored without a rewrite on PostgreSQL 11+."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('endpoints', '0010_merchant_max_in_flight'),
    ]

    operations = [
        migrations.AddField(
            model_name='endpoint',
            name='permanent_statuses',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
