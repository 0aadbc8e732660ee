# Issue 42, item 6: retry policy per endpoint and per merchant. Written by
# hand (endpoints/retry_policy.py reads these: an endpoint's value, else its
# merchant's, else the relay's setting).

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0021_endpoint_signing"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="retry_schedule",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="endpoint",
            name="timeout_seconds",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="merchant",
            name="retry_schedule",
            field=models.JSONField(
                blank=True,
                help_text="Default delays in seconds between attempts for this "
                "merchant's endpoints, as a list ([5, 30, 300]: attempt n+1 waits "
                "the n-th, the last repeating). Empty: the relay's full-jitter "
                "backoff.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="merchant",
            name="max_attempts",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Default attempts per delivery for this merchant's "
                "endpoints. Empty: the MAX_ATTEMPTS setting.",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="merchant",
            name="timeout_seconds",
            field=models.FloatField(
                blank=True,
                help_text="Default per-attempt timeout for this merchant's "
                "endpoints. Empty: the HTTP_TIMEOUT_SECONDS setting.",
                null=True,
            ),
        ),
        migrations.AddConstraint(
            model_name="merchant",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("max_attempts__isnull", True),
                    ("max_attempts__gte", 1),
                    _connector="OR",
                ),
                name="merchant_max_attempts_positive",
            ),
        ),
        migrations.AddConstraint(
            model_name="merchant",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("timeout_seconds__isnull", True),
                    ("timeout_seconds__gt", 0),
                    _connector="OR",
                ),
                name="merchant_timeout_positive",
            ),
        ),
        migrations.AddConstraint(
            model_name="endpoint",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("timeout_seconds__isnull", True),
                    ("timeout_seconds__gt", 0),
                    _connector="OR",
                ),
                name="endpoint_timeout_positive",
            ),
        ),
    ]
