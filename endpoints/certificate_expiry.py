"""Whether an endpoint's client certificate (mTLS) is close to its expiry, in
one place: the operational event (deliveries/notifications/certificates.py)
and any page that shows the endpoint (portal, admin) read the same window,
CLIENT_CERT_EXPIRY_WARNING_DAYS, and say it in the same words. Pure: it
reads the fields it is given and the setting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings

DAY_SECONDS = 86400


@dataclass(frozen=True)
class CertificateExpiry:
    """A client certificate inside the warning window, or past its expiry."""

    subject: str
    not_after: datetime
    # Whole days until not_after, rounded down: 0 on its last day, negative
    # once it has expired (-1 on the first day after).
    days_left: int
    expired: bool

    def words(self) -> str:
        """For a person reading the endpoint's page or an email."""
        day = self.not_after.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        if self.expired:
            return (
                f"Its client certificate expired on {day}: receivers that "
                "require it refuse every delivery until a new one is uploaded."
            )
        if self.days_left == 0:
            when = "within a day"
        else:
            when = f"in {self.days_left} day{'s' if self.days_left > 1 else ''}"
        return (
            f"Its client certificate expires {when} ({day}): upload a new one "
            "before then."
        )


def warning_horizon(*, now: datetime) -> datetime:
    """Certificates that expire at or before this time are warned about."""
    return now + timedelta(days=settings.CLIENT_CERT_EXPIRY_WARNING_DAYS)


def certificate_expiry(
    *, subject: str, not_after: datetime | None, now: datetime
) -> CertificateExpiry | None:
    """The expiry to show, or None: no certificate, or not yet in the window."""
    if not_after is None or not_after > warning_horizon(now=now):
        return None
    left = (not_after - now).total_seconds()
    return CertificateExpiry(
        subject=subject,
        not_after=not_after,
        days_left=math.floor(left / DAY_SECONDS),
        expired=left <= 0,
    )


def endpoint_certificate_expiry(endpoint, *, now: datetime) -> CertificateExpiry | None:
    """certificate_expiry() of an Endpoint row (its tls_subject and tls_not_after)."""
    return certificate_expiry(
        subject=endpoint.tls_subject, not_after=endpoint.tls_not_after, now=now
    )
