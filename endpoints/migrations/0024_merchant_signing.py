# Issue 42, item 4: a merchant's default signing scheme for its new endpoints
# (endpoints/signing_default.py). Written by hand. Nullable, so the release
# before, still running while an upgrade migrates, can go on inserting
# merchants; null means the DEFAULT_SIGNING_SCHEME setting.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0023_endpoint_credentials"),
    ]

    operations = [
        migrations.AddField(
            model_name="merchant",
            name="signing",
            field=models.CharField(
                blank=True,
                choices=[
                    ("v1", "v1: HMAC-SHA256 with the shared secret"),
                    ("v1a", "v1a: Ed25519, checked with the public key"),
                    (
                        "both",
                        "both: v1 and v1a side by side (while receivers move over)",
                    ),
                ],
                help_text="How this merchant's new endpoints sign when they name "
                "no scheme. Empty: the DEFAULT_SIGNING_SCHEME setting. Changing "
                "it changes no existing endpoint.",
                max_length=8,
                null=True,
            ),
        ),
        migrations.AddConstraint(
            model_name="merchant",
            constraint=models.CheckConstraint(
                condition=models.Q(("signing__isnull", True))
                | models.Q(("signing__in", ("v1", "v1a", "both"))),
                name="merchant_signing_known",
            ),
        ),
    ]
