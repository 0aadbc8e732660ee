"""Signing secrets and custom header values at rest: encrypted with Fernet
keys from RELAY_ENCRYPTION_KEYS.

A database dump must not be every merchant's signing key. `EncryptedSecretField`
encrypts on the way into the database and decrypts on the way out, so code
reading `EndpointSecret.secret` (including `values_list("secret")`) gets the
secret, and the column only ever holds a Fernet token. Each encryption uses a
fresh IV: the column cannot be filtered on.

Keys rotate with `cryptography`'s MultiFernet: the first key encrypts, every
listed key decrypts; after adding a new key first, `manage.py
reencrypt_secrets` re-encrypts every row with it (endpoints/reencrypt.py),
and the old key can go. This module knows no model: models import it.
Custom header values (`EncryptedHeadersField`, `Endpoint.headers`) are kept
the same way: a header is often a receiver's credential, so the column holds
each name in clear (the portal shows it) and each value as a Fernet token.
Decryption happens where rows are loaded, and each token is decrypted once
per process and set of keys (DECRYPTED_KEPT of them are kept): the
dispatcher reads every live secret of a batch's endpoints, and every custom
header of every row, at each claim. A token is one secret (or value) in one
version, with its own IV, so a rotated or re-encrypted secret is a new
token; the keys are part of what is kept, so a key taken out of
RELAY_ENCRYPTION_KEYS decrypts nothing it used to.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models


class SecretDecryptionError(RuntimeError):
    """A stored secret did not decrypt with any key in RELAY_ENCRYPTION_KEYS."""


def key_problems(keys: list[str]) -> list[str]:
    """What is wrong with RELAY_ENCRYPTION_KEYS: none, or a malformed entry.

    endpoints/checks.py makes each a system check error, so a process with
    such keys refuses to start (manage.py's commands, the web process).
    """
    if not keys:
        return [
            "Set RELAY_ENCRYPTION_KEYS (comma-separated Fernet keys, the first "
            "encrypts): endpoint signing secrets are encrypted at rest."
        ]
    problems = []
    for index, key in enumerate(keys):
        try:
            Fernet(key)
        except ValueError:
            problems.append(
                f"RELAY_ENCRYPTION_KEYS entry {index + 1} is not a Fernet key "
                "(32 url-safe base64-encoded bytes)."
            )
    return problems


@lru_cache(maxsize=4)
def _cipher(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def cipher() -> MultiFernet:
    return _cipher(tuple(settings.RELAY_ENCRYPTION_KEYS))


def encrypt(plain: str) -> str:
    return cipher().encrypt(plain.encode()).decode("ascii")


DECRYPTED_KEPT = 4096  # tokens: a few hundred kB at most


def decrypt(token: str) -> str:
    return _decrypted(tuple(settings.RELAY_ENCRYPTION_KEYS), token)


@lru_cache(maxsize=DECRYPTED_KEPT)
def _decrypted(keys: tuple[str, ...], token: str) -> str:
    # A failure raises, and lru_cache keeps no exception: tried again next time.
    try:
        return _cipher(keys).decrypt(token.encode("ascii")).decode()
    except (InvalidToken, UnicodeEncodeError):
        raise SecretDecryptionError(
            "An endpoint secret does not decrypt with RELAY_ENCRYPTION_KEYS: "
            "is the key it was encrypted with still listed?"
        ) from None


class EncryptedSecretField(models.TextField):
    """Text encrypted in the column, plain in Python."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else decrypt(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return None if value is None else encrypt(value)


def is_token(value: str) -> bool:
    """Whether value is a token one of the keys decrypts (else: clear text)."""
    try:
        cipher().decrypt(value.encode("ascii"))
    except (InvalidToken, UnicodeEncodeError):
        return False
    return True


def _values(headers, convert):
    if not isinstance(headers, dict):
        return headers
    return {name: convert(value) for name, value in headers.items()}


class EncryptedHeadersField(models.JSONField):
    """{"name": "value"} with every value encrypted in the column, plain in Python."""

    def from_db_value(self, value, expression, connection):
        headers = super().from_db_value(value, expression, connection)
        return _values(headers, decrypt)

    def get_prep_value(self, value):
        return super().get_prep_value(_values(value, encrypt))
