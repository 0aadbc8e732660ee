"""Reads for the portal that live on the endpoints side."""

from __future__ import annotations

from django.db.models import Q

from endpoints.models import Endpoint, EndpointSecret, Membership


def memberships_of(*, user) -> list[Membership]:
    return list(
        Membership.objects.filter(user=user, merchant__is_active=True)
        .select_related("merchant")
        .order_by("merchant__name", "merchant__slug")
    )


def secrets_live(*, endpoint: Endpoint, now) -> list[EndpointSecret]:
    """Secrets that still sign, newest first (two during a rotation overlap)."""
    return list(
        EndpointSecret.objects.filter(endpoint=endpoint)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("-created_at", "-id")
    )
