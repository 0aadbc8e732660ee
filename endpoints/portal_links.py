"""One-time portal links: a platform's backend asks for one, its customer opens it.

A link is single-use and short-lived (PORTAL_LINK_TTL_SECONDS); opening it
starts a portal session for that merchant alone, with the link's role and no
Django user, lasting PORTAL_SESSION_SECONDS. Redeeming is one conditional
UPDATE, so two browsers racing for the same link cannot both get in, and a
link is spent by any attempt to open it, refused or not.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from endpoints.models import Merchant, PortalLink
from relayproject.lib.sessions import session_seen

logger = logging.getLogger("relayproject.portal")

SESSION_KEY = "portal_link"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def portal_link_create(
    *, merchant: Merchant, role: str, created_by: str, now: datetime
) -> tuple[PortalLink, str]:
    """A new link and its token (shown once: only the hash is stored)."""
    token = secrets.token_urlsafe(32)
    link = PortalLink.objects.create(
        merchant=merchant,
        role=role,
        token_hash=_hash(token),
        created_by=created_by[:200],
        created_at=now,
        expires_at=now + timedelta(seconds=settings.PORTAL_LINK_TTL_SECONDS),
    )
    logger.info(
        "portal link created link_id=%s merchant=%s role=%s by=%s",
        link.pk,
        merchant.slug,
        role,
        created_by,
    )
    return link, token


class LinkRefused(Exception):
    """The link cannot open the portal; `reason` says why (see REASONS)."""

    REASONS = ("unknown", "used", "expired", "inactive")

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def portal_link_redeem(*, token: str, now: datetime) -> PortalLink:
    """Use the link once, or raise LinkRefused.

    Whatever the answer, the link is spent by this one conditional UPDATE: a
    link refused because it expired or its merchant was inactive does not
    open the portal later either (say, once the merchant is active again),
    and of two browsers racing for it exactly one gets the row.
    """
    token_hash = _hash(token)
    spent = PortalLink.objects.filter(
        token_hash=token_hash, used_at__isnull=True
    ).update(used_at=now)
    link = (
        PortalLink.objects.select_related("merchant")
        .filter(token_hash=token_hash)
        .first()
    )
    reason = None
    if link is None:
        reason = "unknown"
    elif not spent:
        reason = "used"
    elif link.expires_at <= now:
        reason = "expired"
    elif not link.merchant.is_active:
        reason = "inactive"
    if reason is not None:
        logger.info(
            "portal link refused link_id=%s reason=%s",
            link.pk if link else "-",
            reason,
        )
        raise LinkRefused(reason)
    logger.info(
        "portal link used link_id=%s merchant=%s role=%s",
        link.pk,
        link.merchant.slug,
        link.role,
    )
    return link


@dataclass(frozen=True)
class SessionLink:
    link_id: int
    merchant_id: int
    role: str
    expires_at: float  # unix seconds


def session_start(session, *, link: PortalLink, now: datetime) -> None:
    """Make this session a link session (the caller has flushed any earlier one)."""
    lifetime = settings.PORTAL_SESSION_SECONDS
    session[SESSION_KEY] = {
        "link_id": link.pk,
        "merchant_id": link.merchant_id,
        "role": link.role,
        "expires_at": now.timestamp() + lifetime,
    }
    session.set_expiry(lifetime)
    # Idle time starts now, not at the first page after it.
    session_seen(session, now=now.timestamp())


def session_link(session, *, now: datetime) -> SessionLink | None:
    """The link this session was opened with, while it lasts."""
    data = session.get(SESSION_KEY)
    if not data:
        return None
    if data.get("expires_at", 0) <= now.timestamp():
        return None
    return SessionLink(
        link_id=data["link_id"],
        merchant_id=data["merchant_id"],
        role=data["role"],
        expires_at=data["expires_at"],
    )
