"""Pull endpoints and listen sessions in the staff console: no URL column
nonsense, their state in the place of a breaker's (last pulled, a session's
life), the visibility timeout and its source, no pause offered for what is
never sent, and no disable or enable for a session, which ends instead."""

from __future__ import annotations

import html as markup
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.pull.sessions import pull_touch, session_end, session_start
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = pytest.mark.django_db


def text_of(page: str) -> str:
    return " ".join(markup.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_list_names_pull_endpoints_and_sessions_by_what_they_are(admin_client):
    merchant = factories.merchant()
    pull = factories.endpoint(merchant, url="", kind="pull")
    live = session_start(merchant=merchant, now=utcnow())
    ended = session_start(merchant=merchant, now=utcnow())
    session_end(endpoint=ended, why="idle", now=utcnow())
    response = admin_client.get(reverse("admin:endpoints_endpoint_changelist"))
    assert response.status_code == 200
    rows = {
        pk: text_of(row)
        for pk, row in re.findall(
            r'<tr[^>]*>.*?value="(ep_[a-z0-9]+)"(.*?)</tr>',
            response.content.decode(),
            re.S,
        )
    }
    assert "pulled (no URL)" in rows[pull.pk] and "Pulled" in rows[pull.pk]
    assert "listen session (pulled)" in rows[live.pk]
    assert "Listen session, live" in rows[live.pk]
    assert "Listen session, ended" in rows[ended.pk]
    for pk in (pull.pk, live.pk, ended.pk):
        assert "Sending" not in rows[pk], pk
    filtered = admin_client.get(
        reverse("admin:endpoints_endpoint_changelist") + "?listen_session__exact=1"
    ).content.decode()
    assert live.pk in filtered and pull.pk not in filtered


def test_a_pull_endpoints_page_shows_its_pulling_and_offers_no_pause(
    admin_client, settings
):
    settings.PULL_VISIBILITY_TIMEOUT_SECONDS = 30
    endpoint = factories.endpoint(url="", kind="pull")
    pulled = utcnow().replace(microsecond=0) - timedelta(minutes=2)
    pull_touch(endpoint=endpoint, now=pulled)
    response = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    )
    text = text_of(response.content.decode())
    assert f"last pulled {pulled:%Y-%m-%d %H:%M:%S} UTC" in text
    assert "30 s (the PULL_VISIBILITY_TIMEOUT_SECONDS setting)" in text
    assert "none (nothing is sent: its consumer pulls its messages)" in text
    assert "lease to ack or nack p50" in text
    assert "receiver response time" not in text
    actions = re.findall(r'name="action" value="([a-z_]+)"', response.content.decode())
    assert "open_breaker" not in actions and "reset_breaker" not in actions
    assert "disable_endpoint" in actions


def test_a_listen_sessions_page_shows_its_life_and_offers_no_disable(admin_client):
    merchant = factories.merchant()
    live = session_start(merchant=merchant, now=utcnow())
    response = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[live.pk])
    )
    html = response.content.decode()
    expires = EndpointHealth.objects.get(pk=live.pk).session_expires_at
    assert (
        f"listen session, live: ends {expires:%Y-%m-%d %H:%M:%S} UTC unless pulled"
        in text_of(html)
    )
    actions = re.findall(r'name="action" value="([a-z_]+)"', html)
    assert "disable_endpoint" not in actions and "enable_endpoint" not in actions


def test_the_health_list_says_a_pull_endpoint_is_pulled_not_sending(admin_client):
    endpoint = factories.endpoint(url="", kind="pull")
    response = admin_client.get(reverse("admin:endpoints_endpointhealth_changelist"))
    text = text_of(response.content.decode())
    assert "pulled (no URL)" in text
    assert "nothing is sent, its consumer pulls; never pulled" in text
    assert endpoint.pk in text
