"""Re-encrypt every stored secret and header value with the first key.

Run by `manage.py reencrypt_secrets` after a new key is put first in
RELAY_ENCRYPTION_KEYS. Saving a decrypted value through the model's field
(endpoints/secret_storage.py) encrypts it with the first key; batches keep
each transaction short.
"""

from __future__ import annotations

from django.db import transaction

from endpoints.models import Endpoint, EndpointSecret

REENCRYPT_BATCH = 500


def headers_reencrypt() -> int:
    """Re-encrypt every endpoint's header values with the first key; the number
    of endpoints that have any."""
    done = 0
    last_pk = ""
    while True:
        with transaction.atomic():
            rows = list(
                Endpoint.objects.select_for_update()
                .filter(pk__gt=last_pk)
                .order_by("pk")
                .values_list("pk", "headers")[:REENCRYPT_BATCH]
            )
            for pk, plain in rows:
                if plain:
                    Endpoint.objects.filter(pk=pk).update(headers=plain)
                    done += 1
        if not rows:
            return done
        last_pk = rows[-1][0]


def secrets_reencrypt() -> int:
    """Re-encrypt every stored secret with the first key; the number of rows."""
    done = 0
    last_pk = 0
    while True:
        with transaction.atomic():
            rows = list(
                EndpointSecret.objects.select_for_update()
                .filter(pk__gt=last_pk)
                .order_by("pk")
                .values_list("pk", "secret")[:REENCRYPT_BATCH]
            )
            for pk, plain in rows:
                # Saving the decrypted value encrypts it with the first key.
                EndpointSecret.objects.filter(pk=pk).update(secret=plain)
        if not rows:
            return done
        done += len(rows)
        last_pk = rows[-1][0]
