"""Each merchant's daily allowance of email (RELAY_NOTIFICATION_MAIL_PER_DAY):
notifications and address confirmations alike, counted per message.

One row per merchant, moved by one conditional UPDATE: on PostgreSQL a
second taker waits on the row, then re-checks the count against the first
one's committed value, so no two processes both take the last one.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from django.conf import settings
from django.db.models import Case, F, Q, Value, When

from deliveries.notifications.models import MailQuota


def mail_quota_take(*, merchant_id: int, now: datetime) -> bool:
    """Count one more email for the merchant today; False if the day's are spent."""
    cap = settings.RELAY_NOTIFICATION_MAIL_PER_DAY
    if cap <= 0:
        return False
    today = _day(now)
    MailQuota.objects.bulk_create(
        [MailQuota(merchant_id=merchant_id)], ignore_conflicts=True
    )
    # Another day's count starts again at one; the same day's grows while
    # under the cap. SET reads the row as it was, before this UPDATE.
    under = ~Q(day=today) | Q(day__isnull=True) | Q(sent__lt=cap)
    return bool(
        MailQuota.objects.filter(under, merchant_id=merchant_id).update(
            sent=Case(When(day=today, then=F("sent") + 1), default=Value(1)),
            day=today,
        )
    )


def mail_quota_give_back(*, merchant_id: int, now: datetime) -> None:
    """Uncount an email taken today that was not sent after all."""
    MailQuota.objects.filter(merchant_id=merchant_id, day=_day(now), sent__gt=0).update(
        sent=F("sent") - 1
    )


def _day(now: datetime) -> date:
    return now.astimezone(UTC).date()
