"""Re-encrypt every stored secret, header value, broker credential and
Ed25519 private key with the first key.

Run by `manage.py reencrypt_secrets` after a new key is put first in
RELAY_ENCRYPTION_KEYS. Saving a decrypted value through the model's field
(endpoints/secret_storage.py) encrypts it with the first key; batches keep
each transaction short.
"""

from __future__ import annotations

from django.db import transaction

from endpoints.merchant_keyed import per_merchant
from endpoints.models import Endpoint, EndpointSecret

REENCRYPT_BATCH = 500


def headers_reencrypt() -> int:
    """Re-encrypt every endpoint's header values with the first key; the number
    of endpoints that have any."""
    return _reencrypt(Endpoint.objects.all(), "headers", after="")


def broker_credentials_reencrypt() -> int:
    """Re-encrypt every broker endpoint's user:password with the first key; the
    number of endpoints that have them."""
    return _reencrypt(Endpoint.objects.all(), "broker_credentials", after="")


def signing_keys_reencrypt() -> int:
    """Re-encrypt every endpoint's Ed25519 private key (v1a) with the first
    key; the number of endpoints that have one."""
    return _reencrypt(Endpoint.objects.all(), "signing_private_key", after="")


def secrets_reencrypt() -> int:
    """Re-encrypt every stored secret with the first key; the number of rows."""
    return _reencrypt(EndpointSecret.objects.all(), "secret", after=0)


def _reencrypt(queryset, column: str, *, after) -> int:
    """Rewrite `column` of each row that has a value, in locked batches in key
    order (on Citus, one merchant's rows at a time: it locks rows only in a
    statement that names one shard); the number of rows rewritten."""
    done = 0
    for rows in per_merchant(queryset):
        last_pk = after
        while True:
            with transaction.atomic():
                batch = list(
                    rows.select_for_update()
                    .filter(pk__gt=last_pk)
                    .order_by("pk")
                    .values_list("pk", column)[:REENCRYPT_BATCH]
                )
                for pk, plain in batch:
                    if plain:
                        # Saving the decrypted value through the model's field
                        # encrypts it with the first key.
                        rows.filter(pk=pk).update(**{column: plain})
                        done += 1
            if not batch:
                break
            last_pk = batch[-1][0]
    return done
