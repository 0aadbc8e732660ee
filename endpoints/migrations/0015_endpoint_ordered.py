"""Endpoint.ordered: events sharing an ordering_key are sent one at a time."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('endpoints', '0014_endpoint_verification'),
    ]

    operations = [
        migrations.AddField(
            model_name='endpoint',
            name='ordered',
            field=models.BooleanField(default=False),
        ),
    ]
