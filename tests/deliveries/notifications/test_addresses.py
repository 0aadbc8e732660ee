"""Extra notification addresses (issue 38): one confirmation in the relay's own
words, nothing else until confirmed, at most one confirmation a day, and
each merchant's daily allowance of email. Emails land in Django's locmem
outbox; the portal side is tests/relayproject/portal/test_notification_addresses.py.
"""

from __future__ import annotations

import hashlib
import logging

import pytest
from django.contrib.auth.models import User
from django.core import mail

from deliveries.notifications import addresses
from deliveries.notifications.addresses import address_confirm, confirmation_ask
from deliveries.notifications.mail import outbox_drain
from deliveries.notifications.models import (
    MailQuota,
    NotificationAddress,
    OutgoingEmail,
)
from deliveries.notifications.services import notification_settings_update
from deliveries.notifications.watch import watch_run
from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint, Membership
from endpoints.services import endpoint_disable, endpoint_enable
from tests.deliveries.notifications.conftest import T0, hours, token_in
from tests.support import factories
from tests.support.api import Api

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]

HOSTILE = "Your account is locked: sign in at https://evil.example/login"


@pytest.fixture
def owner(merchant):
    user = User.objects.create_user("olivia", email="olivia@acme.test")
    Membership.objects.create(user=user, merchant=merchant, role="owner")
    return user


def listing(merchant, *extra: str, now=T0):
    return notification_settings_update(
        merchant=merchant,
        email_failing=True,
        email_disabled=True,
        email_enabled=True,
        extra_emails=list(extra),
        now=now,
    )


def drain(now) -> int:
    return outbox_drain(now=lambda: now)


def test_a_new_address_gets_one_confirmation_in_the_relays_words_only(
    merchant, endpoint, settings
):
    settings.RELAY_BASE_URL = "https://relay.example.com"
    merchant.name = HOSTILE
    merchant.save()
    Endpoint.objects.filter(pk=endpoint.pk).update(description=HOSTILE)

    saved = listing(merchant, "OnCall@Example.org")

    assert [a.outcome for a in saved.asked] == ["sent"]
    (message,) = mail.outbox
    assert message.to == ["oncall@example.org"]
    text = message.subject + message.body
    for chosen in ("evil.example", "acme", endpoint.url, endpoint.pk):
        assert chosen not in text
    assert not getattr(message, "alternatives", None)  # plain text only
    token = token_in(message)
    link = f"https://relay.example.com/portal/link/{token}/confirm-address/"
    assert link in message.body
    row = NotificationAddress.objects.get()
    # Only the hash is kept: the link in the email is the one copy.
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(list(NotificationAddress.objects.values_list()))
    assert row.token_expires_at == T0 + addresses.CONFIRM_TTL
    assert row.confirmed_at is None


def test_removing_and_adding_again_sends_no_second_confirmation_within_a_day(
    merchant,
):
    listing(merchant, "oncall@example.org", now=T0)
    listing(merchant, now=T0 + hours(1))
    again = listing(merchant, "oncall@example.org", now=T0 + hours(2))
    asked = confirmation_ask(
        merchant_id=merchant.pk, email="oncall@example.org", now=T0 + hours(3)
    )

    assert [a.outcome for a in again.asked] == ["too_soon"]
    assert (asked.outcome, asked.again_at) == ("too_soon", T0 + hours(24))
    assert len(mail.outbox) == 1
    # The first link still works once the address is listed again.
    assert address_confirm(token=token_in(mail.outbox[0]), now=T0 + hours(4)) == (
        "confirmed"
    )


def test_a_confirmation_may_be_sent_again_after_a_day_and_the_new_link_works(
    merchant,
):
    listing(merchant, "oncall@example.org", now=T0)
    later = confirmation_ask(
        merchant_id=merchant.pk, email="oncall@example.org", now=T0 + hours(24)
    )

    assert later.outcome == "sent"
    first, second = mail.outbox
    assert address_confirm(token=token_in(first), now=T0 + hours(25)) == "unknown"
    assert address_confirm(token=token_in(second), now=T0 + hours(25)) == "confirmed"


def test_the_link_works_once_while_listed_and_not_after_it_expires(merchant):
    listing(merchant, "a@example.org", "b@example.org", "c@example.org")
    a, b, c = (token_in(m) for m in mail.outbox)
    listing(merchant, "a@example.org", "b@example.org", now=T0 + hours(1))

    ttl = addresses.CONFIRM_TTL
    assert address_confirm(token=a, now=T0 + ttl) == "expired"
    assert address_confirm(token=b, now=T0 + hours(2)) == "confirmed"
    assert address_confirm(token=b, now=T0 + hours(2)) == "unknown"  # used
    assert address_confirm(token=c, now=T0 + hours(2)) == "unknown"  # removed
    assert address_confirm(token="not-a-token", now=T0) == "unknown"
    assert addresses.confirmed_addresses(merchant_id=merchant.pk) == ["b@example.org"]
    # Removed and added back, b is pending again; its used link stays used.
    listing(merchant, "a@example.org", now=T0 + hours(3))
    listing(merchant, "a@example.org", "b@example.org", now=T0 + hours(4))
    assert address_confirm(token=b, now=T0 + hours(5)) == "unknown"
    assert addresses.confirmed_addresses(merchant_id=merchant.pk) == []


def test_an_address_gets_no_notification_until_confirmed_and_then_does(
    merchant, endpoint, owner
):
    listing(merchant, "oncall@example.org", now=T0)
    (confirmation,) = mail.outbox
    mail.outbox.clear()
    endpoint_disable(endpoint=endpoint, reason="by hand", by="staff:sam", now=T0)
    watch_run(now=T0 + hours(1))
    drain(T0 + hours(1))
    (disabled,) = mail.outbox
    assert disabled.bcc == ["olivia@acme.test"]

    assert address_confirm(token=token_in(confirmation), now=T0 + hours(2)) == (
        "confirmed"
    )
    endpoint.refresh_from_db()
    endpoint_enable(endpoint=endpoint)
    watch_run(now=T0 + hours(3))
    drain(T0 + hours(3))
    _, enabled = mail.outbox
    assert enabled.subject.startswith("[webhook-relay] Endpoint enabled again")
    assert enabled.bcc == ["olivia@acme.test", "oncall@example.org"]


def test_a_confirmed_address_never_sees_another_recipients_address(
    merchant, endpoint, owner
):
    listing(merchant, "oncall@example.org", now=T0)
    address_confirm(token=token_in(mail.outbox[0]), now=T0)
    mail.outbox.clear()
    endpoint_disable(endpoint=endpoint, reason="by hand", by="staff:sam", now=T0)
    watch_run(now=T0 + hours(1))
    drain(T0 + hours(1))

    (disabled,) = mail.outbox
    assert sorted(disabled.recipients()) == ["olivia@acme.test", "oncall@example.org"]
    # What each recipient's mail program shows: headers and bodies alike.
    wire = disabled.message().as_string()
    assert "olivia@acme.test" not in wire
    assert "oncall@example.org" not in wire
    assert disabled.message()["To"] == "undisclosed-recipients:;"


def test_a_removed_address_gets_nothing_more(merchant, endpoint, owner):
    listing(merchant, "oncall@example.org", now=T0)
    address_confirm(token=token_in(mail.outbox[0]), now=T0)
    listing(merchant, now=T0 + hours(1))
    mail.outbox.clear()
    endpoint_disable(endpoint=endpoint, reason="by hand", by="staff:sam", now=T0)
    watch_run(now=T0 + hours(2))
    drain(T0 + hours(2))
    assert [m.bcc for m in mail.outbox] == [["olivia@acme.test"]]


def test_the_api_keys_name_stays_out_of_the_email(merchant, endpoint, owner):
    _, key = apikey_create(name=HOSTILE, merchant=merchant)
    response = Api(key).patch(
        f"/merchants/acme/endpoints/{endpoint.pk}", {"is_active": False}
    )
    assert response.status_code == 200
    watch_run(now=T0 + hours(1))
    drain(T0 + hours(1))

    (message,) = mail.outbox
    html, _ = message.alternatives[0]
    for text in (message.subject, message.body, html):
        assert "evil.example" not in text
    assert "Why: disabled by user (through the API)." in message.body
    assert OutgoingEmail.objects.get().context["actor"] == HOSTILE  # the event's


def test_past_the_daily_allowance_an_email_is_not_sent_and_says_why(
    merchant, owner, settings, caplog
):
    settings.RELAY_NOTIFICATION_MAIL_PER_DAY = 2
    for n in range(3):
        endpoint = factories.endpoint(merchant, url=f"http://127.0.0.1:9/{n}")
        endpoint_disable(endpoint=endpoint, reason="by hand", by="staff:sam", now=T0)
    watch_run(now=T0 + hours(1))

    with caplog.at_level(logging.WARNING):
        assert drain(T0 + hours(1)) == 2

    assert len(mail.outbox) == 2
    skipped = OutgoingEmail.objects.get(sent_at__isnull=True)
    assert skipped.gave_up
    assert skipped.last_error == (
        "not sent: the merchant's 2 emails for the day "
        "(RELAY_NOTIFICATION_MAIL_PER_DAY) were already sent"
    )
    assert "were already sent" in caplog.text
    assert MailQuota.objects.get(merchant=merchant).sent == 2


def test_confirmations_count_against_the_allowance_and_a_new_day_starts_afresh(
    merchant, settings
):
    settings.RELAY_NOTIFICATION_MAIL_PER_DAY = 2
    saved = listing(merchant, "a@example.org", "b@example.org", "c@example.org")
    assert [a.outcome for a in saved.asked] == ["sent", "sent", "no_allowance"]
    # Not spent on c: it may be sent as soon as the allowance allows.
    tomorrow = T0 + hours(24)
    asked = confirmation_ask(
        merchant_id=merchant.pk, email="c@example.org", now=tomorrow
    )
    assert asked.outcome == "sent"
    assert len(mail.outbox) == 3


def test_a_confirmation_the_mail_server_refuses_gives_everything_back(merchant):
    listing(merchant, "a@example.org", now=T0)
    first = NotificationAddress.objects.get().token_hash
    later = T0 + hours(25)

    def refuse(message):
        raise ConnectionRefusedError("smtp down")

    failed = confirmation_ask(
        merchant_id=merchant.pk, email="a@example.org", now=later, send=refuse
    )

    assert failed.outcome == "failed"
    assert MailQuota.objects.get(merchant=merchant).sent == 0
    row = NotificationAddress.objects.get()
    assert (row.asked_at, row.token_hash) == (T0, first)  # the first link works
    again = confirmation_ask(merchant_id=merchant.pk, email="a@example.org", now=later)
    assert again.outcome == "sent"
