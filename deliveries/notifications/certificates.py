"""relay.endpoint.certificate_expiring: an active endpoint's client
certificate (mTLS) is inside CLIENT_CERT_EXPIRY_WARNING_DAYS of its expiry,
or past it. Said once per certificate: tls_expiry_warned_for holds the
tls_not_after it was said for, so a new certificate (a new not_after) is
said about again.

Run by the periodic check (step.py), which one dispatcher a minute wins;
two that run it at once still say each certificate once, as the mark is a
conditional UPDATE in the same transaction as the event.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import F, Q

from deliveries.notifications.operational import (
    CERTIFICATE_EXPIRING,
    OPERATIONAL_MERCHANT_SLUG,
    endpoint_part,
    operational_publish,
    ts,
)
from endpoints.certificate_expiry import certificate_expiry, warning_horizon
from endpoints.models import Endpoint

_READ = ("pk", "merchant_id", "tls_not_after")


def certificates_to_warn(*, now: datetime) -> list[tuple[str, int, datetime]]:
    """(endpoint id, merchant id, not_after) of active endpoints whose
    certificate is in the window and not yet said: one statement, on the
    few endpoints that have a certificate at all."""
    unsaid = Q(tls_expiry_warned_for__isnull=True) | ~Q(
        tls_expiry_warned_for=F("tls_not_after")
    )
    return list(
        Endpoint.objects.filter(
            unsaid,
            is_active=True,
            tls_not_after__isnull=False,
            tls_not_after__lte=warning_horizon(now=now),
        )
        # The operational endpoints are never announced to themselves.
        .exclude(merchant__slug=OPERATIONAL_MERCHANT_SLUG)
        .order_by("pk")
        .values_list(*_READ)
    )


def certificate_warn(
    *, endpoint_id: str, merchant_id: int, not_after: datetime, now: datetime
) -> bool:
    """Mark this certificate as said and publish the event, in one
    transaction; False when another process marked it first, or the
    endpoint changed (disabled, a new certificate) since it was read."""
    expiry = certificate_expiry(subject="", not_after=not_after, now=now)
    if expiry is None:
        return False
    with transaction.atomic():
        # A second caller waits on the row lock, then re-reads the condition
        # against the winner's commit and updates nothing.
        marked = (
            Endpoint.objects.filter(
                pk=endpoint_id,
                merchant_id=merchant_id,  # names the shard on Citus
                is_active=True,
                tls_not_after=not_after,
            )
            .exclude(tls_expiry_warned_for=not_after)
            .update(tls_expiry_warned_for=not_after)
        )
        if not marked:
            return False
        endpoint = Endpoint.objects.select_related("merchant").get(
            pk=endpoint_id, merchant_id=merchant_id
        )
        operational_publish(
            type=CERTIFICATE_EXPIRING,
            data={
                "merchant": endpoint.merchant.slug,
                "endpoint": endpoint_part(endpoint),
                "subject": endpoint.tls_subject,
                "not_after": ts(not_after),
                "days_left": expiry.days_left,
                "expired": expiry.expired,
            },
            now=now,
        )
    return True


def certificates_warn(*, now: datetime) -> list[str]:
    """Say every certificate that is due; the endpoints said about."""
    return [
        endpoint_id
        for endpoint_id, merchant_id, not_after in certificates_to_warn(now=now)
        if certificate_warn(
            endpoint_id=endpoint_id,
            merchant_id=merchant_id,
            not_after=not_after,
            now=now,
        )
    ]
