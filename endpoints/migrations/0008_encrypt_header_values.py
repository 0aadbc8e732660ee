"""Custom header values are encrypted at rest (endpoints/secret_storage.py).

Every value still in clear is encrypted with the first key of
RELAY_ENCRYPTION_KEYS; names stay readable. Raw SQL on purpose: the model's
field would try to decrypt the plain values it reads. A value that already
decrypts with a listed key is left alone, so running it again changes nothing.
"""

import json

from django.db import migrations

import endpoints.secret_storage


def _rewrite(schema_editor, *, convert) -> None:
    connection = schema_editor.connection
    table = connection.ops.quote_name("endpoints_endpoint")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, headers FROM {table}")
        rows = cursor.fetchall()
        for pk, raw in rows:
            headers = json.loads(raw) if isinstance(raw, str | bytes) else raw
            if not headers:
                continue
            changed = {name: convert(value) for name, value in headers.items()}
            if changed != headers:
                cursor.execute(
                    f"UPDATE {table} SET headers = %s WHERE id = %s",
                    [json.dumps(changed), pk],
                )


def _encrypted(value: str) -> str:
    storage = endpoints.secret_storage
    return value if storage.is_token(value) else storage.encrypt(value)


def _decrypted(value: str) -> str:
    storage = endpoints.secret_storage
    return storage.decrypt(value) if storage.is_token(value) else value


def encrypt_plain(apps, schema_editor):
    _rewrite(schema_editor, convert=_encrypted)


def decrypt_all(apps, schema_editor):
    _rewrite(schema_editor, convert=_decrypted)


class Migration(migrations.Migration):
    dependencies = [("endpoints", "0007_apikey_create_permission_owner_links")]

    operations = [
        migrations.AlterField(
            model_name="endpoint",
            name="headers",
            field=endpoints.secret_storage.EncryptedHeadersField(
                blank=True, default=dict
            ),
        ),
        migrations.RunPython(encrypt_plain, decrypt_all),
    ]
