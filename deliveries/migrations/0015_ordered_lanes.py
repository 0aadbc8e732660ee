"""Ordered lanes (deliveries/lanes.py): an event's ordering_key, a delivery's
lane (ordering_key, lane_seq), its out_of_order mark and the `waiting`
status. Columns with constant defaults: no partition is rewritten. The two
indexes are partial (laned rows that are unfinished), so unordered traffic
writes neither; neither is unique (a unique index on the day-partitioned
table would have to include the id): the lane's advisory lock keeps one head
per lane. On Citus they are made on every shard like the others."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0014_merchant_columns'),
        ('endpoints', '0015_endpoint_ordered'),
    ]

    operations = [
        migrations.AddField(
            model_name='delivery',
            name='lane_seq',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='delivery',
            name='ordering_key',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.AddField(
            model_name='delivery',
            name='out_of_order',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='event',
            name='ordering_key',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.AlterField(
            model_name='delivery',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('delivering', 'Delivering'), ('succeeded', 'Succeeded'), ('dead', 'Dead'), ('waiting', 'Waiting in its lane')], default='pending', max_length=16),
        ),
        migrations.AddIndex(
            model_name='delivery',
            index=models.Index(condition=models.Q(('status__in', ['pending', 'delivering']), models.Q(('ordering_key', ''), _negated=True)), fields=['endpoint', 'ordering_key'], name='delivery_lane_head_idx'),
        ),
        migrations.AddIndex(
            model_name='delivery',
            index=models.Index(condition=models.Q(('status', 'waiting')), fields=['endpoint', 'ordering_key', 'lane_seq'], name='delivery_lane_waiting_idx'),
        ),
    ]
