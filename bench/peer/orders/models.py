from django.db import models


class Order(models.Model):
    """What an event is in the relay bench: an order paid, 1999 EUR, a note."""

    amount = models.IntegerField(default=1999)
    currency = models.CharField(max_length=3, default="EUR")
    note = models.CharField(max_length=200, default="x" * 120)

    def __str__(self) -> str:
        return f"order {self.pk}"
