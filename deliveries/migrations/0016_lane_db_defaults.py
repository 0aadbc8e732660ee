"""The lane columns default in the database too, so an INSERT that names none
of them (a bench seed, a test's SQL) still works; SET DEFAULT rewrites nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0015_ordered_lanes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='delivery',
            name='lane_seq',
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name='delivery',
            name='ordering_key',
            field=models.CharField(blank=True, db_default='', default='', max_length=255),
        ),
        migrations.AlterField(
            model_name='delivery',
            name='out_of_order',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name='event',
            name='ordering_key',
            field=models.CharField(blank=True, db_default='', default='', max_length=255),
        ),
    ]
