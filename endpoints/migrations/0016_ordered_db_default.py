"""The lane columns default in the database too, so an INSERT that names none
of them (a bench seed, a test's SQL) still works; SET DEFAULT rewrites nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('endpoints', '0015_endpoint_ordered'),
    ]

    operations = [
        migrations.AlterField(
            model_name='endpoint',
            name='ordered',
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
