"""Listen sessions in the portal: every role sees the live ones; owners and
developers start one (its secret and command shown once) and end one; a
viewer's start or end is refused with nothing written; an ended session
leaves the lists."""

from __future__ import annotations

import html as markup
import re

import pytest
from django.test import Client
from django.urls import reverse

from deliveries.models import Delivery, ErrorKind
from deliveries.pull.sessions import session_end, session_start
from deliveries.services import event_publish
from endpoints.models import Endpoint, EndpointSecret, Membership
from relayproject.lib.clock import utcnow
from tests.support.portal import user_with_role


def text_of(page: str) -> str:
    return " ".join(markup.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def listen_url(world) -> str:
    return reverse("portal:listen_sessions", args=[world.mine.merchant.slug])


def start_url(world) -> str:
    return reverse("portal:listen_session_start", args=[world.mine.merchant.slug])


def end_url(world, session: Endpoint) -> str:
    return reverse(
        "portal:listen_session_end", args=[world.mine.merchant.slug, session.pk]
    )


@pytest.fixture
def developer(world):
    return user_with_role(world.mine.merchant, Membership.Role.DEVELOPER, "dev")


@pytest.fixture
def session(world) -> Endpoint:
    return session_start(
        merchant=world.mine.merchant, event_types=["order.*"], now=utcnow()
    )


def sessions_state() -> list:
    """Everything starting or ending a session writes."""
    return list(
        Endpoint.objects.filter(listen_session=True)
        .order_by("pk")
        .values_list("pk", "is_active", "disabled_reason")
    ) + list(Delivery.objects.order_by("pk").values_list("pk", "status"))


def test_every_role_sees_the_live_sessions_and_only_those(client, world, session):
    ended = session_start(merchant=world.mine.merchant, now=utcnow())
    session_end(endpoint=ended, why="stopped", now=utcnow())
    theirs = session_start(merchant=world.theirs.merchant, now=utcnow())
    client.force_login(world.viewer)
    html = client.get(listen_url(world)).content.decode()
    assert session.pk in html
    assert ended.pk not in html
    assert theirs.pk not in html
    assert "<code>order.<wbr>*</code>" in html
    text = text_of(html)
    assert "Last pulled" in text and "never" in text
    # A viewer has nothing to press.
    assert 'id="start-session"' not in html
    assert f'id="end-{session.pk}"' not in html
    assert end_url(world, session) not in html
    assert "Only owners and developers can start or end a session" in text


@pytest.mark.parametrize("action", ["start", "end"])
def test_a_viewers_post_is_refused_and_changes_nothing(client, world, session, action):
    client.force_login(world.viewer)
    before = sessions_state()
    url = start_url(world) if action == "start" else end_url(world, session)
    response = client.post(url, {"event_types": "order.*"})
    assert response.status_code == 403
    assert "forbidden" in response.templates[0].name
    assert sessions_state() == before


def test_a_post_without_the_csrf_token_is_refused(world, developer, session):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(developer)
    before = sessions_state()
    assert browser.post(start_url(world), {"event_types": ""}).status_code == 403
    assert browser.post(end_url(world, session)).status_code == 403
    assert sessions_state() == before


def test_a_developer_starts_a_session_and_sees_its_secret_once(
    client, world, developer
):
    client.force_login(developer)
    response = client.post(
        start_url(world), {"event_types": "order.* payment.captured", "description": ""}
    )
    assert response.status_code == 302
    assert response["Location"] == listen_url(world)
    started = Endpoint.objects.get(merchant=world.mine.merchant, listen_session=True)
    assert started.is_active and started.kind == "pull"
    assert started.event_types == ["order.*", "payment.captured"]
    secret = EndpointSecret.objects.get(endpoint=started).secret
    first = client.get(listen_url(world))
    html = first.content.decode()
    assert first["Cache-Control"] == "no-store"
    assert f'id="started-id">{started.pk}<' in html
    assert f'id="started-secret">{secret}<' in html
    command = text_of(re.search(r'id="started-command">(.*?)</code>', html).group(1))
    assert command.startswith(
        f"webhook-relay-client listen --session {started.pk} --merchant acme --url "
    )
    assert command.endswith("--forward-to http://localhost:3000/webhooks")
    assert "WEBHOOK_RELAY_API_KEY" in text_of(html)
    again = client.get(listen_url(world)).content.decode()
    assert secret not in again  # shown once
    assert started.pk in again  # and listed as live


def test_a_developer_ends_a_session_and_its_waiting_messages_go_dead(
    client, world, developer, session
):
    event = event_publish(merchant=world.mine.merchant, type="order.paid", data={})
    waiting = Delivery.objects.get(event_id=event.pk, endpoint=session)
    client.force_login(developer)
    response = client.post(end_url(world, session), follow=True)
    assert response.redirect_chain[-1][0] == listen_url(world)
    session.refresh_from_db()
    assert not session.is_active
    assert session.disabled_reason == "listen session ended in the portal"
    waiting.refresh_from_db()
    assert (waiting.status, waiting.last_error) == ("dead", ErrorKind.LISTEN_ENDED)
    text = text_of(response.content.decode())
    assert f"Listen session {session.pk} ended" in text
    assert "1 unfinished message went dead." in text
    assert f'id="end-{session.pk}"' not in response.content.decode()


def test_ending_from_the_sessions_page_goes_back_there(client, world, session):
    client.force_login(world.owner)
    response = client.post(end_url(world, session), {"next": "endpoint"})
    assert response["Location"] == reverse(
        "portal:endpoint_detail", args=[world.mine.merchant.slug, session.pk]
    )
    again = client.post(end_url(world, session), follow=True)
    assert "had ended already" in text_of(again.content.decode())


def test_only_a_listen_session_is_ended_here(client, world, session):
    client.force_login(world.owner)
    plain = world.mine.endpoint
    theirs = session_start(merchant=world.theirs.merchant, now=utcnow())
    before = sessions_state()
    assert client.post(end_url(world, plain)).status_code == 404
    url = reverse("portal:listen_session_end", args=["acme", theirs.pk])
    assert client.post(url).status_code == 404
    plain.refresh_from_db()
    assert plain.is_active
    assert sessions_state() == before


def test_a_wrong_event_type_is_refused_beside_its_field(client, world, developer):
    client.force_login(developer)
    response = client.post(start_url(world), {"event_types": "order..paid"})
    assert response.status_code == 400
    html = response.content.decode()
    errors = re.search(r'id="event_types-errors">(.*?)</ul>', html).group(1)
    assert "Not an event type" in text_of(errors)
    assert 'value="order..paid"' in html
    assert not Endpoint.objects.filter(listen_session=True).exists()


def test_a_full_endpoint_quota_is_said_and_nothing_is_started(client, world, developer):
    world.mine.merchant.max_endpoints = 1  # its one endpoint counts already
    world.mine.merchant.save()
    client.force_login(developer)
    response = client.post(start_url(world), {"event_types": ""})
    assert response.status_code == 400
    assert "endpoint" in text_of(
        re.search(
            r'<ul class="errorlist nonfield">(.*?)</ul>', response.content.decode()
        ).group(1)
    )
    assert not Endpoint.objects.filter(listen_session=True).exists()


def test_the_endpoint_list_marks_live_sessions_and_hides_ended_ones(
    client, world, session
):
    ended = session_start(merchant=world.mine.merchant, now=utcnow())
    session_end(endpoint=ended, why="idle", now=utcnow())
    client.force_login(world.viewer)
    html = client.get(
        reverse("portal:endpoint_list", args=[world.mine.merchant.slug])
    ).content.decode()
    assert f"listen session {session.pk}" in text_of(html)
    assert ended.pk not in html
    # The count is the quota's: an ended session is not counted.
    assert "2 of at most" in text_of(html)


def test_an_ended_sessions_page_says_it_ended_and_offers_no_reenable(
    client, world, session
):
    session_end(endpoint=session, why="idle", now=utcnow())
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    html = client.get(
        reverse("portal:endpoint_detail", args=[slug, session.pk])
    ).content.decode()
    text = text_of(html)
    assert "This listen session ended" in text
    assert "nothing pulled for LISTEN_IDLE_SECONDS" in text
    assert 'id="reenable"' not in html and 'id="toggle"' not in html
    for name in ("endpoint_toggle", "endpoint_reenable"):
        response = client.post(reverse(f"portal:{name}", args=[slug, session.pk]))
        assert response.status_code == 302
        assert not Endpoint.objects.get(pk=session.pk).is_active


def test_a_live_sessions_page_attaches_the_listen_command(client, world, session):
    client.force_login(world.owner)
    html = client.get(
        reverse("portal:endpoint_detail", args=[world.mine.merchant.slug, session.pk])
    ).content.decode()
    command = text_of(re.search(r'id="snippet-listen">(.*?)</code>', html).group(1))
    assert f"--session {session.pk} --merchant acme" in command
    assert 'id="end-session"' in html
