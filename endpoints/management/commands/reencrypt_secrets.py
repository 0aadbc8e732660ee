"""Re-encrypt every endpoint signing secret and custom header value with the
first RELAY_ENCRYPTION_KEYS key."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from endpoints.reencrypt import headers_reencrypt, secrets_reencrypt


class Command(BaseCommand):
    help = (
        "Re-encrypt every endpoint secret and custom header value with the "
        "first key of "
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
