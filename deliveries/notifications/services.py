"""Writes for notifications: re-enable with held deliveries, merchants' email
choices and extra addresses, and the platform's operational endpoints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from deliveries.models import Delivery
from deliveries.notifications import addresses as extra
from deliveries.notifications.models import EndpointWatch, NotificationSettings
from deliveries.notifications.operational import (
    OPERATIONAL_TYPES,
    operational_merchant,
)
from deliveries.publish.outbox import notify_dispatchers
from endpoints import brokers, verification
from endpoints import services as endpoint_services
from endpoints.matching import subscribes_to
from endpoints.models import Endpoint, Merchant
from relayproject.lib.clock import utcnow

MAX_EXTRA_EMAILS = 10


def endpoint_reenable(*, endpoint: Endpoint, retry_held: bool, now: datetime) -> int:
    """Enable (breaker closed); with retry_held, held deliveries are due now.

    Held deliveries keep their attempt counts: being held spent nothing.
    Returns how many pending deliveries the endpoint has.
    """
    with transaction.atomic():
        endpoint_services.endpoint_enable(endpoint=endpoint)
        pending = Delivery.objects.filter(
            endpoint=endpoint, status=Delivery.Status.PENDING
        )
        count = pending.update(next_attempt_at=now) if retry_held else pending.count()
        # Failures from before count no more (the check says "enabled" later).
        EndpointWatch.objects.update_or_create(
            endpoint=endpoint, defaults={"reenabled_at": now}
        )
        if count:
            notify_dispatchers()
    return count


@dataclass
class SettingsSaved:
    settings: NotificationSettings
    asked: list[extra.Ask] = field(default_factory=list)  # newly listed addresses


def notification_settings_update(
    *,
    merchant: Merchant,
    email_failing: bool,
    email_disabled: bool,
    email_enabled: bool,
    extra_emails: Sequence[str] | None = None,
    now: datetime | None = None,
) -> SettingsSaved:
    """Validate every address before writing anything; None keeps the list.

    Each newly listed address is sent its confirmation after commit (call
    this outside a transaction): until it is confirmed it gets no other email.
    Who may change the list is the caller's check (owners only).
    """
    now = now or utcnow()
    addresses = None
    if extra_emails is not None:
        addresses = list(
            dict.fromkeys(filter(None, map(extra.normalised, extra_emails)))
        )
        errors = []
        if len(addresses) > MAX_EXTRA_EMAILS:
            errors.append(f"At most {MAX_EXTRA_EMAILS} addresses.")
        for address in addresses:
            try:
                validate_email(address)
            except ValidationError:
                errors.append(f"Not an email address: {address!r}.")
        if errors:
            raise ValidationError({"extra_emails": errors})
    new: list[str] = []
    with transaction.atomic():
        # update_or_create locks the settings row: two saves take turns.
        found, _ = NotificationSettings.objects.update_or_create(
            merchant=merchant,
            defaults={
                "email_failing": email_failing,
                "email_disabled": email_disabled,
                "email_enabled": email_enabled,
            },
        )
        if addresses is not None:
            new = extra.addresses_set(
                merchant_id=merchant.pk, addresses=addresses, now=now
            )
    asked = [
        extra.confirmation_ask(merchant_id=merchant.pk, email=address, now=now)
        for address in new
    ]
    return SettingsSaved(settings=found, asked=asked)


def operational_types_check(event_types: Sequence[str]) -> None:
    """Each subscription must match at least one operational event type."""
    bad = [
        t
        for t in event_types
        if not any(subscribes_to([t], o) for o in OPERATIONAL_TYPES)
    ]
    if bad:
        raise ValidationError(
            {
                "event_types": [
                    f"{bad[0]!r} matches no operational event type "
                    f"({', '.join(sorted(OPERATIONAL_TYPES))})."
                ]
            }
        )


# The relay's own events are sent to the platform; a pull endpoint would need
# its consumer to name the relay's internal merchant, which nothing documents.
NOT_PULLED = "Operational events are sent, not pulled: choose http or a broker kind."


def operational_endpoint_create(
    *, event_types: Sequence[str] = (), **fields
) -> Endpoint:
    operational_types_check(event_types)
    if fields.get("kind") == brokers.PULL:
        raise ValidationError({"kind": [NOT_PULLED]})
    endpoint = endpoint_services.endpoint_create(
        merchant=operational_merchant(), event_types=event_types, **fields
    )
    _vouched(endpoint, now=fields["now"])
    return endpoint


def operational_endpoint_update(*, endpoint: Endpoint, **changes) -> Endpoint:
    if changes.get("kind") == brokers.PULL:
        raise ValidationError({"kind": [NOT_PULLED]})
    if changes.get("event_types") is not None:
        operational_types_check(changes["event_types"])
    endpoint = endpoint_services.endpoint_update(endpoint=endpoint, **changes)
    _vouched(endpoint, now=changes["now"])
    return endpoint


def _vouched(endpoint: Endpoint, *, now: datetime) -> None:
    """The platform's own endpoints are not asked to prove themselves under
    REQUIRE_ENDPOINT_VERIFICATION: only platform keys make or change them,
    and those are trusted with every merchant already."""
    if endpoint.awaiting_verification:
        verification.endpoint_mark_verified(endpoint=endpoint, by="platform", now=now)
        endpoint.refresh_from_db()
