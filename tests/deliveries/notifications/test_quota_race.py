"""The daily email allowance on real PostgreSQL: two takers of the last email
of the day, the first holding its transaction open (the helpers of
test_races.py). A read-then-write count lets both through; the one
conditional UPDATE makes the second wait and then see the first's count."""

from __future__ import annotations

import pytest

from deliveries.notifications.models import MailQuota
from deliveries.notifications.quota import mail_quota_take
from tests.deliveries.notifications.conftest import T0, hours
from tests.deliveries.notifications.test_races import race
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("earlier", [None, T0 - hours(24)], ids=["new", "yesterday"])
def test_two_takers_of_the_last_email_of_the_day_get_it_once(settings, earlier):
    settings.RELAY_NOTIFICATION_MAIL_PER_DAY = 1
    merchant = factories.merchant("acme")
    # The row exists (a count of another day, or none yet): only its lock
    # orders the two.
    MailQuota.objects.create(
        merchant=merchant, day=earlier and earlier.date(), sent=1 if earlier else 0
    )

    def take() -> bool:
        return mail_quota_take(merchant_id=merchant.pk, now=T0)

    assert race(take, take) == (True, False)
    row = MailQuota.objects.get()
    assert (row.day, row.sent) == (T0.date(), 1)
