"""Re-encrypt every endpoint signing secret, custom header value, broker
credential and Ed25519 private key with the first RELAY_ENCRYPTION_KEYS key."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from endpoints.reencrypt import (
    broker_credentials_reencrypt,
    headers_reencrypt,
    secrets_reencrypt,
    signing_keys_reencrypt,
)


class Command(BaseCommand):
    help = (
        "Re-encrypt every endpoint secret, custom header value, broker "
        "credential and Ed25519 private key with the first key of "
        "RELAY_ENCRYPTION_KEYS (run after putting a new key first; then the "
        "old key may be removed)."
    )

    def handle(self, *args, **options) -> None:
        count = secrets_reencrypt()
        self.stdout.write(f"Re-encrypted {count} endpoint secret(s).")
        count = headers_reencrypt()
        self.stdout.write(
            f"Re-encrypted the custom header values of {count} endpoint(s)."
        )
        count = broker_credentials_reencrypt()
        self.stdout.write(
            f"Re-encrypted the broker credentials of {count} endpoint(s)."
        )
        count = signing_keys_reencrypt()
        self.stdout.write(
            f"Re-encrypted the Ed25519 private keys of {count} endpoint(s)."
        )
