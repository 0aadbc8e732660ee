"""The email outbox, sent after commit: never inside a transaction, never on
a dispatcher's send loop (a maintenance thread drains it, see step.py).

A row is claimed in a short transaction (its send_after moves a lease ahead,
so a process that dies mid-send leaves it for another), sent with Django's
email framework, then marked sent; a failure is retried with backoff. Each
email counts against its merchant's daily allowance (quota.py); past it the
row is given up with the reason.

Recipients are the merchant's owners and the extra addresses whose owners
confirmed them (addresses.py). What an API key or a person named itself
(the `actor` of a disable) stays out of the email: the event carries it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse

from deliveries.notifications.addresses import confirmed_addresses
from deliveries.notifications.models import Kind, OutgoingEmail
from deliveries.notifications.quota import mail_quota_give_back, mail_quota_take
from endpoints.models import Membership
from relayproject.lib import citus

logger = logging.getLogger(__name__)

SEND_LEASE = timedelta(minutes=5)
MAX_TRIES = 5
RETRY_AFTER = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30))

SUBJECTS = {
    Kind.FAILING: "Endpoint failing: {url}",
    Kind.DISABLED: "Endpoint disabled: {url}",
    Kind.ENABLED: "Endpoint enabled again: {url}",
}
# Who disabled an endpoint, in words; never the actor's own name.
BY_WORDS = {
    "receiver": "by the receiver",
    "auto-disable": "by auto-disable",
    "staff": "by the relay's staff",
    "merchant": "in the portal",
    "api": "through the API",
}


def owner_addresses(*, merchant_id: int) -> list[str]:
    """The addresses of the merchant's active owners (not the extra ones)."""
    owners = Membership.objects.filter(
        merchant_id=merchant_id,
        role=Membership.Role.OWNER,
        user__is_active=True,
    ).exclude(user__email="")
    return list(owners.values_list("user__email", flat=True).order_by("user__pk"))


def recipients_of(*, merchant_id: int) -> list[str]:
    """The merchant's owners with an address, then its confirmed extra ones."""
    addresses = owner_addresses(merchant_id=merchant_id)
    addresses += confirmed_addresses(merchant_id=merchant_id)
    return list(dict.fromkeys(a.strip() for a in addresses if a.strip()))


def portal_url(name: str, *args: str) -> str:
    return settings.RELAY_BASE_URL + reverse(name, args=args)


# The To header of a notification: a group with no members (RFC 5322 3.4).
UNDISCLOSED = "undisclosed-recipients:;"


def email_render(row: OutgoingEmail, *, to: list[str]) -> EmailMultiAlternatives:
    slug = row.context["merchant"]
    endpoint = row.context["endpoint"]
    context = {
        "kind": row.kind,
        "c": row.context,
        "endpoint_url": portal_url("portal:endpoint_detail", slug, endpoint["id"]),
        "settings_url": portal_url("portal:notifications", slug),
        "held": row.context.get("held_deliveries"),
        "by_words": BY_WORDS.get(row.context.get("by", ""), ""),
    }
    message = EmailMultiAlternatives(
        subject="[webhook-relay] "
        + SUBJECTS[Kind(row.kind)].format(url=endpoint["url"])[:150],
        body=render_to_string("notifications/email.txt", context),
        # Every recipient blind: an extra address must not learn the owners'
        # addresses (or the other extras'), which the portal shows owners only.
        bcc=to,
        headers={"To": UNDISCLOSED},
    )
    message.attach_alternative(
        render_to_string("notifications/email.html", context), "text/html"
    )
    return message


def _claim(now: datetime) -> OutgoingEmail | None:
    due = OutgoingEmail.objects.filter(
        sent_at__isnull=True, gave_up=False, send_after__lte=now
    ).order_by("send_after", "pk")
    if citus.on():
        # Citus locks rows only in a statement that names one shard: the
        # merchant of the first due email, read without a lock, first.
        merchant_id = due.values_list("merchant_id", flat=True).first()
        if merchant_id is None:
            return None
        due = due.filter(merchant_id=merchant_id)
    with transaction.atomic():
        row = due.select_for_update(skip_locked=True).first()
        if row is not None:
            row.tries += 1
            row.send_after = now + SEND_LEASE
            row.save(update_fields=["tries", "send_after"])
        return row


def _send(message: EmailMultiAlternatives) -> None:
    message.send(fail_silently=False)


def outbox_drain(
    *,
    now: Callable[[], datetime],
    send: Callable[[EmailMultiAlternatives], None] = _send,
    limit: int = 100,
) -> int:
    """Send due emails one by one, each after its claim has committed; count sent."""
    sent = 0
    for _ in range(limit):
        row = _claim(now())
        if row is None:
            break
        to = recipients_of(merchant_id=row.merchant_id)
        if to and not mail_quota_take(merchant_id=row.merchant_id, now=now()):
            _skip(row)
            continue
        try:
            if to:
                send(email_render(row, to=to))
        except Exception as exc:  # SMTP and friends: any failure is retried
            mail_quota_give_back(merchant_id=row.merchant_id, now=now())
            gave_up = row.tries >= MAX_TRIES
            delay = RETRY_AFTER[min(row.tries - 1, len(RETRY_AFTER) - 1)]
            OutgoingEmail.objects.filter(pk=row.pk).update(
                last_error=f"{type(exc).__name__}: {exc}"[:500],
                send_after=now() + delay,
                gave_up=gave_up,
            )
            logger.warning(
                "email %s to merchant %s failed (try %d%s): %s",
                row.kind,
                row.merchant_id,
                row.tries,
                ", giving up" if gave_up else "",
                exc,
            )
            continue
        OutgoingEmail.objects.filter(pk=row.pk).update(sent_at=now(), recipients=to)
        logger.info(
            "email %s for endpoint %s sent to %d address(es)",
            row.kind,
            row.endpoint_id,
            len(to),
        )
        sent += 1
    return sent


def _skip(row: OutgoingEmail) -> None:
    """Not sent: the merchant's emails for today are spent. Not retried."""
    cap = settings.RELAY_NOTIFICATION_MAIL_PER_DAY
    reason = (
        f"not sent: the merchant's {cap} emails for the day "
        "(RELAY_NOTIFICATION_MAIL_PER_DAY) were already sent"
        if cap > 0
        else "not sent: RELAY_NOTIFICATION_MAIL_PER_DAY is 0"
    )
    OutgoingEmail.objects.filter(pk=row.pk).update(gave_up=True, last_error=reason)
    logger.warning(
        "email %s for endpoint %s of merchant %s %s",
        row.kind,
        row.endpoint_id,
        row.merchant_id,
        reason,
    )
