# Issue 42, item 4: Ed25519 (v1a) signing per endpoint. Written by hand:
# other fields were half-made in the tree then, and makemigrations would take them.

from django.db import migrations, models

import endpoints.secret_storage


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0020_broker_destinations"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="signing",
            field=models.CharField(
                choices=[
                    ("v1", "v1: HMAC-SHA256 with the shared secret"),
                    ("v1a", "v1a: Ed25519, checked with the public key"),
                    (
                        "both",
                        "both: v1 and v1a side by side (while receivers move over)",
                    ),
                ],
                db_default="v1",
                default="v1",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="endpoint",
            name="signing_private_key",
            field=endpoints.secret_storage.EncryptedSecretField(
                blank=True, editable=False, null=True
            ),
        ),
        migrations.AddField(
            model_name="endpoint",
            name="signing_public_key",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, max_length=64
            ),
        ),
    ]
