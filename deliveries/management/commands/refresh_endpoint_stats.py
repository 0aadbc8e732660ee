"""python manage.py refresh_endpoint_stats: recompute the 24 h latency figures now."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from deliveries.ops.stats import endpoint_stats_refresh
from relayproject.lib.clock import utcnow


class Command(BaseCommand):
    help = "Recompute p50/p95/p99, success rate and the slow flag of every endpoint."

    def handle(self, *args, **options) -> None:
        count = endpoint_stats_refresh(now=utcnow())
        self.stdout.write(f"refreshed the statistics of {count} endpoints")
