from __future__ import annotations

from django.db import transaction
from shop.models import Order, User

from deliveries.services import event_publish
from endpoints.models import Merchant


class PaymentDeclined(Exception):
    pass


def order_place(
    *, customer: User, merchant: Merchant, total_cents: int, declined: bool = False
) -> Order:
    """The order and its order.placed event commit together, or neither does."""
    with transaction.atomic():
        order = Order.objects.create(customer=customer, total_cents=total_cents)
        event_publish(
            merchant=merchant,
            type="order.placed",
            data={"order_id": order.pk, "total_cents": total_cents},
        )
        if declined:
            raise PaymentDeclined(f"order {order.pk}")
    return order
