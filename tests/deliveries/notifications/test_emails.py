"""Emails, captured by Django's locmem backend: content and link, the per-day
limit, the merchant's opt-out, and nothing sent while a transaction is open."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection, transaction

from deliveries.notifications.addresses import address_confirm
from deliveries.notifications.mail import outbox_drain
from deliveries.notifications.models import OutgoingEmail
from deliveries.notifications.services import notification_settings_update
from deliveries.notifications.watch import watch_run
from endpoints.models import Membership
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from tests.deliveries.notifications.conftest import (
    T0,
    attempt,
    failures,
    hours,
    token_in,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]


@pytest.fixture
def owner(merchant):
    user = User.objects.create_user("olivia", email="olivia@acme.test")
    Membership.objects.create(user=user, merchant=merchant, role="owner")
    viewer = User.objects.create_user("victor", email="victor@acme.test")
    Membership.objects.create(user=viewer, merchant=merchant, role="viewer")
    return user


def drain(now=T0) -> int:
    return outbox_drain(now=lambda: now)


def test_disabled_email_has_text_html_why_and_the_portal_link(
    endpoint, owner, settings
):
    settings.RELAY_BASE_URL = "https://relay.example.com"
    failures(endpoint, start=T0, end=T0 + hours(20), count=20)
    watch_run(now=T0 + hours(120))
    assert mail.outbox == []  # the check only queues it
    assert drain(T0 + hours(120)) == 1
    (message,) = mail.outbox
    assert message.bcc == ["olivia@acme.test"]  # owners only, not the viewer
    assert message.subject == (
        "[webhook-relay] Endpoint disabled: http://127.0.0.1:9/acme"
    )
    link = f"https://relay.example.com/portal/m/acme/endpoints/{endpoint.pk}/"
    assert link in message.body
    assert "auto-disabled: no success for 120 h" in message.body
    assert "20 pending deliveries are held" in message.body
    assert "Re-enable and send held deliveries now" in message.body
    html, mimetype = message.alternatives[0]
    assert mimetype == "text/html"
    assert f'href="{link}"' in html
    assert "https://relay.example.com/portal/m/acme/notifications/" in html
    row = OutgoingEmail.objects.get()
    assert row.sent_at is not None
    assert row.recipients == ["olivia@acme.test"]


def test_failing_email_at_most_once_a_day_per_endpoint_and_kind(endpoint, owner):
    attempt(endpoint, T0)
    endpoint_breaker_open(endpoint_id=endpoint.pk, reason="x", now=T0)
    watch_run(now=T0 + hours(1))  # breaker open: failing, emailed
    failures(endpoint, start=T0 + hours(2), end=T0 + hours(20), count=5)
    watch_run(now=T0 + hours(60))  # 50% of the window, 59 h later: emailed
    attempt(endpoint, T0 + hours(61), ok=True)
    attempt(endpoint, T0 + hours(62))
    endpoint_breaker_open(endpoint_id=endpoint.pk, reason="x", now=T0 + hours(62))
    watch_run(now=T0 + hours(63))  # a new episode, but 3 h after the last email
    drain(T0 + hours(63))
    assert [m.subject.split(":")[0] for m in mail.outbox] == [
        "[webhook-relay] Endpoint failing",
        "[webhook-relay] Endpoint failing",
    ]
    assert "The relay paused it after" in mail.outbox[0].body
    assert "breaker" not in mail.outbox[0].body
    assert "has not answered successfully since 2026-12-01T00:00" in mail.outbox[1].body


def test_merchant_opt_out_per_kind_and_extra_addresses(endpoint, owner, merchant):
    notification_settings_update(
        merchant=merchant,
        email_failing=True,
        email_disabled=False,
        email_enabled=True,
        extra_emails=["oncall@acme.test", "olivia@acme.test"],
        now=T0,
    )
    for confirmation in mail.outbox:  # tests/deliveries/notifications/test_addresses.py
        assert address_confirm(token=token_in(confirmation), now=T0) == "confirmed"
    mail.outbox.clear()
    endpoint_disable(endpoint=endpoint, reason="by hand", by="merchant:olivia", now=T0)
    watch_run(now=T0 + hours(1))
    endpoint.refresh_from_db()
    from endpoints.services import endpoint_enable

    endpoint_enable(endpoint=endpoint)
    watch_run(now=T0 + hours(2))
    drain(T0 + hours(2))
    (message,) = mail.outbox  # the disabled email is off; enabled is on
    assert message.subject.startswith("[webhook-relay] Endpoint enabled again")
    assert message.bcc == ["olivia@acme.test", "oncall@acme.test"]


def test_emails_are_sent_only_after_commit_outside_any_transaction(endpoint, owner):
    endpoint_disable(endpoint=endpoint, reason="by hand", by="staff:sam", now=T0)
    with transaction.atomic():
        watch_run(now=T0 + hours(1))
        assert OutgoingEmail.objects.count() == 1
        assert mail.outbox == []
    seen = []

    def send(message):
        seen.append(connection.in_atomic_block)
        message.send()

    assert outbox_drain(now=lambda: T0 + hours(1), send=send) == 1
    assert seen == [False]
    assert len(mail.outbox) == 1


def test_a_failed_send_is_retried_later(endpoint, owner):
    endpoint_disable(endpoint=endpoint, reason="by hand", by="staff:sam", now=T0)
    watch_run(now=T0)

    def refuse(message):
        raise ConnectionRefusedError("smtp down")

    assert outbox_drain(now=lambda: T0, send=refuse) == 0
    row = OutgoingEmail.objects.get()
    assert row.sent_at is None and "smtp down" in row.last_error
    assert drain(T0) == 0  # not due yet
    assert drain(T0 + hours(1)) == 1
