"""Extra notification addresses: listed by an owner, mailed nothing but a
confirmation until whoever reads that address confirms it.

A confirmation carries the relay's own text and a link, nothing a merchant
chose (no merchant name, no endpoint URL), so it cannot carry a phishing
message. Its token is shown only in the email and stored hashed; it works
once, for CONFIRM_TTL, while the address is listed. At most one is sent to an
address per merchant per ASK_EVERY, removing and adding it again included,
and each one counts against the merchant's daily email allowance (quota.py).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse

from deliveries.notifications.models import NotificationAddress
from deliveries.notifications.quota import mail_quota_give_back, mail_quota_take

logger = logging.getLogger(__name__)

CONFIRM_TTL = timedelta(days=7)
ASK_EVERY = timedelta(days=1)

SENT = "sent"
TOO_SOON = "too_soon"  # one was sent less than ASK_EVERY ago
NO_ALLOWANCE = "no_allowance"  # the merchant's emails for today are spent
FAILED = "failed"  # the mail server refused it
NOT_PENDING = "not_pending"  # not listed, or confirmed already

CONFIRMED = "confirmed"
EXPIRED = "expired"
UNKNOWN = "unknown"  # no such token: never made, used, or its address removed


@dataclass(frozen=True)
class Ask:
    """What became of one confirmation: `outcome` is one of the names above."""

    email: str
    outcome: str
    again_at: datetime | None = None  # TOO_SOON: when it may be sent again


def normalised(address: str) -> str:
    # One row per address whatever its case, so case cannot dodge ASK_EVERY.
    return address.strip().lower()


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def addresses_set(
    *, merchant_id: int, addresses: Sequence[str], now: datetime
) -> list[str]:
    """Make `addresses` (normalised) the listed ones; return those newly listed.

    In the caller's transaction. A removed address stops getting email at
    once and must confirm again if it comes back.
    """
    rows = NotificationAddress.objects.filter(merchant_id=merchant_id)
    wanted = list(dict.fromkeys(addresses))
    listed = set(rows.filter(listed=True).values_list("email", flat=True))
    rows.filter(listed=True).exclude(email__in=wanted).update(
        listed=False, confirmed_at=None
    )
    # A removed row matters only while it holds back a second confirmation.
    rows.filter(listed=False).filter(
        Q(asked_at__isnull=True) | Q(asked_at__lte=now - ASK_EVERY)
    ).delete()
    new = [a for a in wanted if a not in listed]
    NotificationAddress.objects.bulk_create(
        [
            NotificationAddress(merchant_id=merchant_id, email=a, added_at=now)
            for a in new
        ],
        ignore_conflicts=True,
    )
    rows.filter(email__in=new, listed=False).update(listed=True, added_at=now)
    return new


def _send(message: EmailMessage) -> None:
    message.send(fail_silently=False)


def confirmation_message(*, to: str, token: str, expires_at: datetime) -> EmailMessage:
    """The relay's own words and the link; nothing the merchant chose."""
    link = settings.RELAY_BASE_URL + reverse("portal:address_confirm", args=[token])
    body = render_to_string(
        "notifications/confirm.txt",
        {
            "link": link,
            "expires": expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "site": settings.RELAY_BASE_URL,
        },
    )
    return EmailMessage(
        subject="[webhook-relay] Confirm notification emails to this address",
        body=body,
        to=[to],
    )


def confirmation_ask(
    *,
    merchant_id: int,
    email: str,
    now: datetime,
    send: Callable[[EmailMessage], None] = _send,
) -> Ask:
    """Send a pending address its confirmation, unless one went out less than
    ASK_EVERY ago or the merchant's emails for today are spent.

    The row is claimed and the allowance taken in one short transaction; the
    email is sent after commit. A refused send gives both back.
    """
    token = secrets.token_urlsafe(32)
    digest = token_digest(token)
    expires_at = now + CONFIRM_TTL
    with transaction.atomic():
        row = (
            NotificationAddress.objects.select_for_update()
            .filter(
                merchant_id=merchant_id,
                email=email,
                listed=True,
                confirmed_at__isnull=True,
            )
            .first()
        )
        if row is None:
            return Ask(email, NOT_PENDING)
        if row.asked_at is not None and now - row.asked_at < ASK_EVERY:
            return Ask(email, TOO_SOON, again_at=row.asked_at + ASK_EVERY)
        if not mail_quota_take(merchant_id=merchant_id, now=now):
            return Ask(email, NO_ALLOWANCE)
        mine = NotificationAddress.objects.filter(merchant_id=merchant_id, email=email)
        mine.update(asked_at=now, token_hash=digest, token_expires_at=expires_at)
    try:
        send(confirmation_message(to=email, token=token, expires_at=expires_at))
    except Exception as exc:  # SMTP and friends: nothing was sent
        # The earlier link, if any, still works; the owner may ask again now.
        mine.filter(token_hash=digest).update(
            asked_at=row.asked_at,
            token_hash=row.token_hash,
            token_expires_at=row.token_expires_at,
        )
        mail_quota_give_back(merchant_id=merchant_id, now=now)
        logger.warning(
            "address confirmation for merchant %s not sent: %s",
            merchant_id,
            type(exc).__name__,
        )
        return Ask(email, FAILED)
    logger.info("address confirmation sent for merchant %s", merchant_id)
    return Ask(email, SENT)


def address_by_token(token: str) -> NotificationAddress | None:
    """The listed, unconfirmed address this token was sent to, if any."""
    return NotificationAddress.objects.filter(
        token_hash=token_digest(token), listed=True, confirmed_at__isnull=True
    ).first()


def address_confirm(*, token: str, now: datetime) -> str:
    """CONFIRMED (once: the token is spent by the same UPDATE), EXPIRED or UNKNOWN."""
    row = address_by_token(token)
    if row is None:
        return UNKNOWN
    if row.token_expires_at is None or row.token_expires_at <= now:
        return EXPIRED
    done = NotificationAddress.objects.filter(
        merchant_id=row.merchant_id,
        email=row.email,
        token_hash=row.token_hash,
        listed=True,
        confirmed_at__isnull=True,
        token_expires_at__gt=now,
    ).update(confirmed_at=now, token_hash="", token_expires_at=None)
    if not done:
        return UNKNOWN
    logger.info("address confirmed for merchant %s", row.merchant_id)
    return CONFIRMED


def confirmed_addresses(*, merchant_id: int) -> list[str]:
    """The listed addresses whose owners confirmed them: the only extras mailed."""
    return list(
        NotificationAddress.objects.filter(
            merchant_id=merchant_id, listed=True, confirmed_at__isnull=False
        )
        .order_by("email")
        .values_list("email", flat=True)
    )


def listed_addresses(*, merchant_id: int) -> list[NotificationAddress]:
    return list(
        NotificationAddress.objects.filter(
            merchant_id=merchant_id, listed=True
        ).order_by("added_at", "email")
    )
