"""The Notifications page and its extra addresses (issue 38): only owners add,
remove or re-send to them and see anyone's address; an added address gets one
confirmation in the relay's words and confirms it from the link, without
signing in. Emails land in Django's locmem outbox."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from deliveries.notifications.models import NotificationAddress, NotificationSettings
from endpoints import portal_links
from endpoints.models import Membership
from relayproject.lib.clock import utcnow
from relayproject.lib.logs import scrub_link_tokens
from tests.deliveries.notifications.conftest import token_in
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db

HOSTILE = "Your account is locked: sign in at https://evil.example/login"
ONLY_OWNERS = "Only the merchant&#x27;s owners can add or remove addresses."


def link_client(merchant, role: str) -> Client:
    """A browser holding a portal-link session (no Django user) with `role`."""
    _, token = portal_links.portal_link_create(
        merchant=merchant, role=role, created_by="test", now=utcnow()
    )
    client = Client()
    assert client.post(reverse("portal:link_open", args=[token])).status_code == 302
    return client


@pytest.fixture
def owner(client, world):
    world.owner.email = "olivia@acme.test"
    world.owner.save()
    client.force_login(world.owner)
    return client


def settings_url() -> str:
    return reverse("portal:notification_settings", args=["acme"])


def page_url() -> str:
    return reverse("portal:notifications", args=["acme"])


def add(client: Client, addresses: str):
    return client.post(
        settings_url(), {"email_failing": "on", "extra_emails": addresses}
    )


def test_a_developer_link_cannot_add_an_address(world):
    developer = link_client(world.mine.merchant, Membership.Role.DEVELOPER)
    assert "<textarea" not in developer.get(page_url()).content.decode()

    response = add(developer, "spam-target@example.org")

    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="extra_emails-errors"' in html and ONLY_OWNERS in html
    assert not NotificationAddress.objects.exists()
    assert not NotificationSettings.objects.exists()  # nothing of the form saved
    assert mail.outbox == []


def test_a_developers_save_changes_the_kinds_and_keeps_the_addresses(owner, world):
    add(owner, "ops@example.org")
    developer = user_with_role(world.mine.merchant, "developer", "dev")
    client = Client()
    client.force_login(developer)

    response = client.post(settings_url(), {"email_disabled": "on"})

    assert response.status_code == 302
    saved = NotificationSettings.objects.get()
    assert (saved.email_failing, saved.email_disabled) == (False, True)
    assert NotificationAddress.objects.get().listed


def test_a_developer_cannot_send_a_confirmation_either(owner, world):
    add(owner, "ops@example.org")
    developer = link_client(world.mine.merchant, Membership.Role.DEVELOPER)
    NotificationAddress.objects.update(asked_at=None)  # as if never asked

    response = developer.post(settings_url(), {"ask": "ops@example.org"})

    assert response.status_code == 400
    assert ONLY_OWNERS in response.content.decode()
    assert len(mail.outbox) == 1  # the owner's, when it was added


def test_an_owner_adds_an_address_and_only_a_confirmation_goes_out(owner, world):
    world.mine.merchant.name = HOSTILE
    world.mine.merchant.save()

    response = add(owner, "Ops@Example.org")

    assert response.status_code == 302
    (message,) = mail.outbox
    assert message.to == ["ops@example.org"]
    for chosen in ("evil.example", "acme", world.mine.endpoint.url):
        assert chosen not in message.subject + message.body
    html = owner.get(page_url()).content.decode()
    assert "A confirmation was sent to ops@example.org" in html
    assert 'data-address="ops@example.org"' in html
    assert "<strong>pending</strong>, gets nothing until confirmed" in html
    assert "its link still works" in html
    assert "Send the confirmation" not in html  # not again the same day


def test_sending_again_the_same_day_is_refused_and_says_when(owner):
    add(owner, "ops@example.org")

    response = owner.post(settings_url(), {"ask": "ops@example.org"}, follow=True)

    assert "one was sent less than a day ago" in response.content.decode()
    assert len(mail.outbox) == 1


def test_the_link_confirms_on_its_post_only_and_only_once(owner):
    add(owner, "ops@example.org")
    url = reverse("portal:address_confirm", args=[token_in(mail.outbox[0])])
    visitor = Client()  # the address's owner: nobody signed in

    shown = visitor.get(url)
    assert shown.status_code == 200
    assert "ops@example.org" in shown.content.decode()
    assert shown["Referrer-Policy"] == "origin"
    assert "no-cache" in shown["Cache-Control"]
    assert NotificationAddress.objects.get().confirmed_at is None  # a prefetch

    done = visitor.post(url)
    assert done.status_code == 200
    assert "Address confirmed" in done.content.decode()
    assert NotificationAddress.objects.get().confirmed_at is not None
    assert visitor.post(url).status_code == 404
    html = owner.get(page_url()).content.decode()
    assert "<strong>confirmed</strong>" in html


def test_the_links_token_is_scrubbed_from_log_lines_like_a_portal_links():
    url = reverse("portal:address_confirm", args=["Xq-secret_token"])
    line = f"Not Found: {url}"
    assert scrub_link_tokens(line) == (
        "Not Found: /portal/link/[redacted]/confirm-address/"
    )


@pytest.mark.parametrize(
    "who", ["viewer", "viewer link", "developer link", "developer"]
)
def test_only_owners_see_the_owners_and_the_extra_addresses(owner, world, who):
    add(owner, "ops@example.org")
    role = who.split()[0]
    if who.endswith("link"):
        client = link_client(world.mine.merchant, role)
    else:
        client = Client()
        client.force_login(
            world.viewer
            if role == "viewer"
            else user_with_role(world.mine.merchant, role, "dev")
        )

    html = client.get(page_url()).content.decode()

    assert "olivia@acme.test" not in html and "ops@example.org" not in html
    assert "(1 with an email address)" in html
    assert "1 extra address, 0 confirmed. Only owners see and change them." in html
    mine = owner.get(page_url()).content.decode()
    assert "olivia@acme.test" in mine and "ops@example.org" in mine
