"""Seed a demo for `make run`: a staff login, a merchant, an endpoint, an API key."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.urls import reverse

from endpoints.apikeys import apikey_create
from endpoints.models import Membership, Merchant
from endpoints.services import endpoint_create
from relayproject.lib.clock import utcnow

STAFF = ("admin", "admin-demo-password")
MERCHANT_USER = ("merchant", "merchant-demo-password")


class Command(BaseCommand):
    help = "Create demo data (idempotent) and print how to use it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args, base_url: str, **options) -> None:
        users = get_user_model()
        if not users.objects.filter(username=STAFF[0]).exists():
            users.objects.create_superuser(STAFF[0], "admin@example.com", STAFF[1])
        if not users.objects.filter(username=MERCHANT_USER[0]).exists():
            users.objects.create_user(
                MERCHANT_USER[0], "merchant@example.com", MERCHANT_USER[1]
            )
        merchant, created = Merchant.objects.get_or_create(
            slug="acme", defaults={"name": "Acme Payments (demo)"}
        )
        Membership.objects.get_or_create(
            user=users.objects.get(username=MERCHANT_USER[0]),
            merchant=merchant,
            defaults={"role": Membership.Role.OWNER},
        )
        if created or not merchant.endpoints.exists():
            endpoint = endpoint_create(
                merchant=merchant,
                url=base_url.rstrip("/")
                + reverse("demo-receiver", kwargs={"endpoint_id": "new"}),
                description="demo receiver",
                now=utcnow(),
            )
            # The demo receiver's own URL (relayproject/demo.py), by name: the
            # command sits below the faces and does not import one.
            path = reverse("demo-receiver", kwargs={"endpoint_id": endpoint.pk})
            endpoint.url = f"{base_url.rstrip('/')}{path}"
            endpoint.save(update_fields=["url"])
        endpoint = merchant.endpoints.first()
        _key, raw_key = apikey_create(name="demo (make run)", merchant=None)
        base = base_url.rstrip("/")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "webhook-relay demo is ready.",
                    f"  Staff admin:     {base}/admin/   login {STAFF[0]} / {STAFF[1]}",
                    f"  Merchant portal: {base}/portal/  login {MERCHANT_USER[0]} / {MERCHANT_USER[1]}",
                    f"  Demo receiver:   {endpoint.url}",
                    f"  API docs:        {base}/api/v1/docs",
                    "",
                    "Publish an event (this API key is shown once):",
                    f"  curl -s -X POST {base}/api/v1/events \\",
                    f"    -H 'Authorization: Bearer {raw_key}' -H 'Content-Type: application/json' \\",
                    '    -d \'{"merchant": "acme", "type": "payment.captured", "data": {"amount": 1200}}\'',
                    "",
                ]
            )
        )
