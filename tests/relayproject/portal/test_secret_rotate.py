"""The portal's rotate page: the overlap is chosen there, each choice says what
it does, and "at once" leaves only the new secret signing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from endpoints.selectors import live_secrets
from relayproject.lib.clock import utcnow
from relayproject.portal.forms import overlap_words

pytestmark = pytest.mark.django_db


def rotate_url(world) -> str:
    return reverse(
        "portal:secret_rotate",
        args=[world.mine.merchant.slug, world.mine.endpoint.pk],
    )


def signing(endpoint) -> list[str]:
    return live_secrets(endpoint_ids=[endpoint.pk], now=utcnow())[endpoint.pk]


def test_the_page_offers_at_once_for_a_leaked_secret_and_marks_the_default(
    client, world, settings
):
    settings.SECRET_ROTATION_OVERLAP_SECONDS = 86400
    client.force_login(world.owner)

    html = client.get(rotate_url(world)).content.decode()

    assert "At once: only the new secret signs from now on. For a leaked secret" in (
        html
    )
    assert "After 24 hours (the default): both secrets sign until" in html
    for other in ("1 hour", "2 days", "7 days"):
        assert f"After {other}: both secrets sign until" in html
    assert re.search(r'value="86400"[^>]* checked>', html)


def test_an_operators_own_default_is_offered_and_marked(client, world, settings):
    settings.SECRET_ROTATION_OVERLAP_SECONDS = 12 * 3600
    client.force_login(world.owner)

    html = client.get(rotate_url(world)).content.decode()

    assert "After 12 hours (the default)" in html
    assert "After 24 hours: both secrets sign" in html


def test_rotating_at_once_leaves_only_the_new_secret_and_says_so(client, world):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint

    page = client.post(rotate_url(world), {"overlap_seconds": "0"}, follow=True)

    [new] = signing(endpoint)
    assert new != endpoint.secrets.order_by("created_at", "id").first().secret
    assert "The previous one has stopped signing" in page.content.decode()


def test_rotating_with_2_days_keeps_the_old_secret_until_then(client, world):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint
    old = endpoint.secrets.get()

    page = client.post(rotate_url(world), {"overlap_seconds": "172800"}, follow=True)

    old.refresh_from_db()
    assert signing(endpoint)[1] == old.secret
    said = f"keeps signing until {old.expires_at:%Y-%m-%d %H:%M} UTC"
    assert said in page.content.decode()


def test_an_overlap_not_offered_is_refused_and_nothing_changes(client, world):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint

    response = client.post(rotate_url(world), {"overlap_seconds": "604801"})

    assert response.status_code == 200
    assert "overlap_seconds-errors" in response.content.decode()
    assert endpoint.secrets.count() == 1


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(3600, "1 hour"), (86400, "24 hours"), (172800, "2 days"), (5400, "90 minutes")],
)
def test_overlap_words(seconds, words):
    assert overlap_words(seconds) == words
