"""Seed the demo for `make run` (deliveries/demo_seed.py) and print how to use it."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from deliveries.demo_seed import MERCHANT_SLUG, MERCHANT_USER, STAFF, demo_seed
from relayproject.lib.clock import utcnow


class Command(BaseCommand):
    help = "Create demo data (idempotent) and print how to use it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args, base_url: str, **options) -> None:
        demo = demo_seed(base_url=base_url, now=utcnow())
        base = base_url.rstrip("/")
        event = (
            f'{{"merchant": "{MERCHANT_SLUG}", "type": "order.paid", '
            '"data": {"order": {"id": 8812, "amount": 1999}}}'
        )
        lines = [
            "webhook-relay demo is ready.",
            f"  Staff admin:     {base}/admin/   login {STAFF[0]} / {STAFF[1]}",
            f"  Merchant portal: {base}/portal/  login {MERCHANT_USER[0]} / "
            f"{MERCHANT_USER[1]}",
            f"  Demo receiver:   {demo.receiver.url}",
            f"  API docs:        {base}/api/v1/docs",
            "",
            "Publish an event (this API key is shown once):",
            f"  curl -s -X POST {base}/api/v1/events \\",
            f"    -H 'Authorization: Bearer {demo.api_key}' "
            "-H 'Content-Type: application/json' \\",
            f"    -d '{event}'",
        ]
        self.stdout.write("\n".join(["", *lines, ""]))
