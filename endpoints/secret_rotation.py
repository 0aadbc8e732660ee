"""Writes for an endpoint's signing secrets after its first: a rotation, with
the previous secret's overlap (the first: endpoint_create, endpoints.services;
the format: endpoints.secrets)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from endpoints.models import Endpoint, EndpointSecret
from endpoints.secrets import ROTATION_OVERLAP_MAX_SECONDS, generate_secret


def endpoint_rotate_secret(
    *, endpoint: Endpoint, now: datetime, overlap_seconds: int | None = None
) -> tuple[EndpointSecret, datetime]:
    """New secret signs from now on; the previous one keeps signing for the
    overlap (SECRET_ROTATION_OVERLAP_SECONDS unless given, 0 to
    ROTATION_OVERLAP_MAX_SECONDS); 0 stops every older secret at once."""
    if overlap_seconds is None:
        overlap_seconds = settings.SECRET_ROTATION_OVERLAP_SECONDS
    elif not 0 <= overlap_seconds <= ROTATION_OVERLAP_MAX_SECONDS:
        raise ValidationError(
            {
                "overlap_seconds": "The overlap must be from 0 to "
                f"{ROTATION_OVERLAP_MAX_SECONDS} seconds (7 days)."
            }
        )
    expires = now + timedelta(seconds=overlap_seconds)
    with transaction.atomic():
        # Only the newest secret gets the overlap; any older secret still
        # alive from an earlier rotation ends now rather than lingering.
        live = EndpointSecret.objects.select_for_update().filter(
            merchant_id=endpoint.merchant_id,  # one shard on Citus
            endpoint=endpoint,
        )
        live = [s for s in live if s.expires_at is None or s.expires_at > now]
        live.sort(key=lambda s: (s.created_at, s.pk), reverse=True)
        for index, old in enumerate(live):
            old.expires_at = expires if index == 0 else min(old.expires_at or now, now)
            old.save(update_fields=["expires_at"])
        secret = EndpointSecret.objects.create(
            endpoint=endpoint, secret=generate_secret(), created_at=now
        )
    return secret, expires
