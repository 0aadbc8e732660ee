"""A merchant with one endpoint at --receiver, then two orders: one commits,
one is declined inside its transaction. Prints the committed order's id."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand
from django.utils import timezone
from shop.models import User
from shop.services import PaymentDeclined, order_place

from endpoints.merchant_services import merchant_create
from endpoints.models import Membership
from endpoints.services import endpoint_create


class Command(BaseCommand):
    def add_arguments(self, parser) -> None:
        parser.add_argument("--receiver", required=True)

    def handle(self, *args, receiver: str, **options) -> None:
        alice = User.objects.create_user("alice", "alice@shop.example", "pw-alice-1")
        merchant = merchant_create(slug="shop", name="The shop")
        Membership.objects.create(
            user=alice, merchant=merchant, role=Membership.Role.OWNER
        )
        endpoint_create(
            merchant=merchant,
            url=receiver,
            event_types=["order.placed"],
            now=timezone.now(),
        )
        kept = order_place(customer=alice, merchant=merchant, total_cents=1200)
        try:
            order_place(
                customer=alice, merchant=merchant, total_cents=9900, declined=True
            )
        except PaymentDeclined:
            pass
        self.stdout.write(json.dumps({"committed_order": kept.pk}))
