"""create_api_key --name NAME [--merchant SLUG]: the key is printed once, last."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from endpoints.apikeys import apikey_create
from endpoints.models import Merchant


class Command(BaseCommand):
    help = "Create a REST API key (platform-wide, or scoped with --merchant)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--merchant", metavar="SLUG")

    def handle(self, *args, name: str, merchant: str | None, **options) -> None:
        scope = None
        if merchant:
            scope = Merchant.objects.filter(slug=merchant).first()
            if scope is None:
                raise CommandError(f"No merchant {merchant!r}.")
        key, full_key = apikey_create(name=name, merchant=scope)
        what = f"merchant {scope.slug}" if scope else "platform"
        self.stdout.write(f"API key {key.prefix}… ({what}); it is not shown again:")
        self.stdout.write(full_key)
