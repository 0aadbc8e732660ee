"""Endpoint secrets are encrypted at rest (endpoints/secret_storage.py).

The column becomes text wide enough for a Fernet token, then every secret
still in clear (a whsec_ value) is encrypted with the first key of
RELAY_ENCRYPTION_KEYS. Raw SQL on purpose: the model's field would try to
decrypt the plain rows it reads. Running it again changes nothing.
"""

from django.db import migrations

import endpoints.secret_storage

PLAIN_PREFIX = "whsec_"


def _rewrite(schema_editor, *, wanted, convert) -> None:
    connection = schema_editor.connection
    table = connection.ops.quote_name("endpoints_endpointsecret")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, secret FROM {table}")
        rows = [(pk, value) for pk, value in cursor.fetchall() if wanted(value)]
        for pk, value in rows:
            cursor.execute(
                f"UPDATE {table} SET secret = %s WHERE id = %s", [convert(value), pk]
            )


def encrypt_plain(apps, schema_editor):
    _rewrite(
        schema_editor,
        wanted=lambda value: value.startswith(PLAIN_PREFIX),
        convert=endpoints.secret_storage.encrypt,
    )


def decrypt_all(apps, schema_editor):
    _rewrite(
        schema_editor,
        wanted=lambda value: not value.startswith(PLAIN_PREFIX),
        convert=endpoints.secret_storage.decrypt,
    )


class Migration(migrations.Migration):
    dependencies = [("endpoints", "0002_membership_grant_permission")]

    operations = [
        migrations.AlterField(
            model_name="endpointsecret",
            name="secret",
            field=endpoints.secret_storage.EncryptedSecretField(),
        ),
        migrations.RunPython(encrypt_plain, decrypt_all),
    ]
