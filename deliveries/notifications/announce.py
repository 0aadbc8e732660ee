"""Say one thing about one endpoint: an operational event and, for merchants
who want it, an email in the outbox. Runs inside the caller's transaction and
writes rows only; the email itself is sent after commit by mail.py."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from deliveries.notifications.models import (
    EndpointWatch,
    Kind,
    NotificationSettings,
    OutgoingEmail,
)
from deliveries.notifications.operational import is_operational, operational_publish
from endpoints.models import Endpoint


def notification_settings(*, merchant_id: int) -> NotificationSettings:
    """The merchant's choices; everything on until it changes them."""
    found = NotificationSettings.objects.filter(merchant_id=merchant_id).first()
    return found or NotificationSettings(merchant_id=merchant_id)


def announce(
    *,
    endpoint: Endpoint,
    watch: EndpointWatch,
    event_type: str,
    data: dict,
    now: datetime,
    email_kind: str | None = None,
) -> None:
    """Publish event_type and queue the email of email_kind if it is due.

    watch is the caller's locked row; the email time is set on it, saved by
    the caller in the same transaction.
    """
    if is_operational(endpoint.merchant):
        return  # never announce the operational endpoints to themselves
    operational_publish(type=event_type, data=data, now=now)
    if email_kind is None:
        return
    if not notification_settings(merchant_id=endpoint.merchant_id).wants(email_kind):
        return
    field = f"emailed_{email_kind}_at"
    last = getattr(watch, field)
    interval = timedelta(hours=settings.NOTIFY_EMAIL_MIN_INTERVAL_HOURS)
    if last is not None and now - last < interval:
        return
    setattr(watch, field, now)
    OutgoingEmail.objects.create(
        kind=Kind(email_kind),
        merchant_id=endpoint.merchant_id,
        endpoint=endpoint,
        context={"type": event_type, **data},
        created_at=now,
        send_after=now,
    )
