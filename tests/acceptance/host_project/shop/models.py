from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """The project's own user model: the relay's memberships point at it."""


class Order(models.Model):
    customer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    total_cents = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"order {self.pk}"
