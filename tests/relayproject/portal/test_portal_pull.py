"""Pull endpoints in the portal: the form offers kind pull with its one field
(the visibility timeout) and none of a send's, errors sit next to it, and
every page about a pull endpoint or its deliveries says what is true of one:
it is pulled, not sent; no URL, breaker, dispatcher or HTTP answer."""

from __future__ import annotations

import html as markup
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries import words
from deliveries.models import Delivery, ErrorKind
from deliveries.pull import leasing
from deliveries.pull.acks import messages_nack
from deliveries.pull.leasing import messages_lease
from deliveries.pull.sessions import pull_touch, session_end
from deliveries.services import event_publish
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from tests.deliveries.test_words_on_pages import codes_shown
from tests.support import factories

COMMON = {
    "description": "",
    "event_types": "",
    "max_attempts": "",
    "retry_schedule": "",
}
# What a browser posts after the HTTP fields were typed in, then pull picked.
SEND_LEFTOVERS = {
    "url": "https://example.com/hook",
    "headers": "X-Api-Key: k1",
    "rate_limit_per_second": "5",
    "max_in_flight": "3",
    "timeout_seconds": "9",
    "permanent_statuses": "400",
}
# Words that would be false of a pull endpoint's page.
SEND_WORDS = (
    "dispatcher",
    "Being sent now",
    "Waiting to be sent",
    "send slot",
    "Sent at once",
    "Timeout per attempt",
    "Retry-After",
    "pauses the endpoint",
    "Custom headers",
)


def text_of(page: str) -> str:
    """What a person reads: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(markup.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def field_errors(html: str, name: str) -> str:
    match = re.search(rf'<ul class="errorlist" id="{name}-errors">(.*?)</ul>', html)
    return text_of(match.group(1)) if match else ""


def group_hidden(html: str, kinds: str) -> bool:
    match = re.search(
        rf'<div class="kind-fields" data-kinds="{kinds}"( hidden)?>', html
    )
    assert match, f"no group for {kinds}"
    return bool(match.group(1))


def page(client, name: str, *args) -> str:
    response = client.get(reverse(f"portal:{name}", args=args))
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def pull(world) -> Endpoint:
    return factories.endpoint(
        world.mine.merchant, url="", kind="pull", description="Warehouse feed"
    )


def published(endpoint: Endpoint, *, due_at=None) -> Delivery:
    event = event_publish(
        merchant=endpoint.merchant,
        type="order.paid",
        data={"n": 1},
        endpoint_ids=[endpoint.pk],
    )
    delivery = event.created_deliveries[0]
    if due_at is not None:  # published a while ago, as the clock is passed in
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=due_at)
    return delivery


# -- the form -----------------------------------------------------------


def test_the_form_offers_pull_with_only_its_own_field_shown(client, world):
    client.force_login(world.owner)
    url = reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    html = client.get(url + "?kind=pull").content.decode()
    assert re.search(r'value="pull"[^>]*checked', html)
    assert "Pull (the receiver fetches its messages)" in html
    assert not group_hidden(html, "pull")
    assert group_hidden(html, "http")  # the URL and the test receiver
    # What shapes a send is on the page for the picker, hidden for pull.
    for name in ("headers", "rate_limit_per_second", "max_in_flight"):
        block = re.search(
            rf'<div class="kind-fields" data-kinds="([a-z ]+)"( hidden)?>\s*'
            rf'<div class="field[^"]*" data-field="{name}"',
            html,
        )
        assert block, name
        assert "pull" not in block.group(1).split() and block.group(2), name


def test_a_pull_endpoint_is_created_with_its_visibility_timeout(client, world):
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    response = client.post(
        reverse("portal:endpoint_create", args=[slug]),
        {
            **COMMON,
            **SEND_LEFTOVERS,
            "kind": "pull",
            "description": "Warehouse",
            "visibility_timeout_seconds": "45",
        },
    )
    assert response.status_code == 302, text_of(response.content.decode())[:2000]
    endpoint = Endpoint.objects.get(merchant=world.mine.merchant, kind="pull")
    assert response["Location"].endswith(f"/endpoints/{endpoint.pk}/")
    assert endpoint.url == ""
    assert endpoint.visibility_timeout_seconds == 45
    # The HTTP fields typed before pull was picked are not read.
    assert endpoint.headers == {}
    assert endpoint.rate_limit_per_second is None
    assert endpoint.max_in_flight is None
    assert endpoint.timeout_seconds is None
    assert endpoint.permanent_statuses == []
    assert not endpoint.awaiting_verification


def test_a_blank_visibility_timeout_is_the_relays_default(client, world, settings):
    settings.PULL_VISIBILITY_TIMEOUT_SECONDS = 77
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    html = page(client, "endpoint_create", slug)
    assert "Empty: the relay&#x27;s default, 77." in html
    response = client.post(
        reverse("portal:endpoint_create", args=[slug]),
        {**COMMON, "kind": "pull", "visibility_timeout_seconds": ""},
    )
    assert response.status_code == 302
    endpoint = Endpoint.objects.get(merchant=world.mine.merchant, kind="pull")
    assert endpoint.visibility_timeout_seconds is None


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("0", "Whole seconds from 1 to 43200."),
        ("43201", "Whole seconds from 1 to 43200."),
        ("1.5", "Whole seconds, as 30."),
        ("soon", "Whole seconds, as 30."),
    ],
)
def test_a_wrong_visibility_timeout_is_refused_beside_its_field(
    client, world, typed, said
):
    client.force_login(world.owner)
    before = Endpoint.objects.count()
    response = client.post(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug]),
        {**COMMON, "kind": "pull", "visibility_timeout_seconds": typed},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert field_errors(html, "visibility_timeout_seconds") == said
    assert not group_hidden(html, "pull")  # the error is where it is seen
    assert Endpoint.objects.count() == before


def test_a_wrong_event_type_on_a_pull_endpoint_is_refused_beside_its_field(
    client, world
):
    client.force_login(world.owner)
    before = Endpoint.objects.count()
    response = client.post(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug]),
        {**COMMON, "kind": "pull", "event_types": "order..paid"},
    )
    assert response.status_code == 400
    assert "Not an event type" in field_errors(response.content.decode(), "event_types")
    assert Endpoint.objects.count() == before


def test_the_edit_form_of_a_pull_endpoint_has_nothing_of_a_send(client, world, pull):
    client.force_login(world.owner)
    html = page(client, "endpoint_edit", world.mine.merchant.slug, pull.pk)
    assert 'id="kind-fixed"' in html and 'id="kind-picker"' not in html
    for name in ("url", "headers", "rate_limit_per_second", "max_in_flight"):
        assert f'name="{name}"' not in html, name
    assert 'name="timeout_seconds"' not in html
    assert 'name="permanent_statuses"' not in html
    assert 'name="visibility_timeout_seconds"' in html
    response = client.post(
        reverse("portal:endpoint_edit", args=[world.mine.merchant.slug, pull.pk]),
        {**COMMON, "description": "Renamed", "visibility_timeout_seconds": "120"},
    )
    assert response.status_code == 302
    pull.refresh_from_db()
    assert (pull.description, pull.visibility_timeout_seconds) == ("Renamed", 120)
    assert (pull.kind, pull.url) == ("pull", "")


# -- the endpoint's pages -------------------------------------------------


def test_the_detail_page_says_it_is_pulled_and_how(client, world, pull, settings):
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    html = page(client, "endpoint_detail", slug, pull.pk)
    text = text_of(html)
    assert "A pull endpoint: nothing is sent" in text
    assert "Last pulled never" in text
    assert f"Visibility timeout {settings.PULL_VISIBILITY_TIMEOUT_SECONDS} s" in text
    path = reverse("api:endpoint_get", args=[slug, pull.pk])
    messages = f"{settings.RELAY_BASE_URL}{path}/messages"
    assert f"&#x27;{messages}?limit=10&#x27;" in html
    assert f"&#x27;{messages}/ack&#x27;" in html
    assert f"&#x27;{messages}/nack&#x27;" in html
    assert "webhook-relay-client listen --merchant acme" in text
    for said in SEND_WORDS + ("Broker", "Stop retrying on", "Rate limit"):
        assert said not in text, said


def test_the_detail_page_shows_when_it_was_last_pulled(client, world, pull):
    pulled_at = utcnow().replace(microsecond=0) - timedelta(minutes=3)
    pull_touch(endpoint=pull, now=pulled_at)
    client.force_login(world.viewer)
    html = page(client, "endpoint_detail", world.mine.merchant.slug, pull.pk)
    last = re.search(r'<dd id="last-pulled">(.*?)</dd>', html).group(1)
    assert f"{pulled_at:%Y-%m-%d %H:%M} UTC" in last


def test_the_health_page_of_a_pull_endpoint_promises_no_pause(client, world, pull):
    client.force_login(world.owner)
    text = text_of(page(client, "endpoint_health", world.mine.merchant.slug, pull.pk))
    assert "Pulling Nothing is sent: its consumer pulls; never pulled yet." in text
    assert "never paused" in text
    assert "lease" in text
    for said in SEND_WORDS + ("Try now", "receiver's answer"):
        assert said not in text, said


def test_the_endpoint_list_shows_a_pull_endpoint_as_pulled(client, world, pull):
    client.force_login(world.owner)
    text = text_of(page(client, "endpoint_list", world.mine.merchant.slug))
    assert f"pull endpoint {pull.pk}" in text
    assert "nothing is sent: its consumer pulls; never pulled yet" in text


# -- its deliveries -------------------------------------------------------


def test_a_waiting_message_waits_for_its_consumer_not_a_dispatcher(client, world, pull):
    delivery = published(pull)
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    detail = text_of(page(client, "delivery_detail", slug, delivery.pk))
    assert "Waiting for its consumer to pull it." in detail
    assert "it waits for its consumer to pull it" in detail
    assert "Message as a pull hands it out" in detail
    assert f"to pull endpoint {pull.pk} ," in detail
    for said in (*SEND_WORDS, "POST "):
        assert said not in detail, said
    listing = text_of(page(client, "delivery_list", slug))
    assert "it waits for its consumer to pull it" in listing
    assert "send slot" not in listing


def test_a_leased_message_is_leased_not_being_sent(client, world, pull):
    delivery = published(pull)
    messages_lease(endpoint=pull, limit=10, now=utcnow())
    client.force_login(world.owner)
    text = text_of(
        page(client, "delivery_detail", world.mine.merchant.slug, delivery.pk)
    )
    assert "Leased to its consumer (attempt 1 of" in text
    assert "it waits for an ack or a nack" in text
    assert "Being sent now" not in text


def test_a_lease_that_ran_out_is_the_consumers_not_a_dispatchers(client, world, pull):
    delivery = published(pull)
    now = utcnow()
    messages_lease(endpoint=pull, limit=10, now=now)
    later = now + timedelta(seconds=leasing.visibility_seconds(pull) + 1)
    messages_lease(endpoint=pull, limit=10, now=later)  # spends the lost attempt
    messages_nack(endpoint=pull, ids=[delivery.pk], now=later, retry_after_seconds=0)
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    html = page(client, "delivery_detail", slug, delivery.pk)
    attempts = text_of(re.search(r'id="attempts">(.*?)</table>', html, re.S).group(1))
    assert "Not acked in time: its consumer did not ack or nack it within" in attempts
    assert "The consumer gave it back (nack)" in attempts
    assert "dispatcher" not in text_of(html)
    assert "Status" not in attempts and "Response" not in attempts


def test_a_message_whose_lease_ran_out_says_the_next_pull_takes_it(client, world, pull):
    now = utcnow()
    delivery = published(pull, due_at=now - timedelta(hours=2))
    messages_lease(endpoint=pull, limit=10, now=now - timedelta(hours=1))
    client.force_login(world.owner)
    text = text_of(
        page(client, "delivery_detail", world.mine.merchant.slug, delivery.pk)
    )
    assert "Its consumer did not ack or nack it by" in text
    assert "the next pull hands it out again" in text
    assert "dispatcher" not in text


def test_a_message_last_lost_by_its_consumer_says_so_in_the_log(client, world, pull):
    now = utcnow()
    delivery = published(pull, due_at=now - timedelta(hours=2))
    messages_lease(endpoint=pull, limit=10, now=now - timedelta(hours=1))
    messages_lease(endpoint=pull, limit=10, now=now)
    messages_nack(endpoint=pull, ids=[delivery.pk], now=now, retry_after_seconds=600)
    Delivery.objects.filter(pk=delivery.pk).update(last_error=ErrorKind.LEASE_EXPIRED)
    client.force_login(world.owner)
    listing = text_of(page(client, "delivery_list", world.mine.merchant.slug))
    assert "Not acked in time" in listing
    assert "handed to its consumer at its first pull from" in listing
    assert "dispatcher" not in listing


def test_a_message_dead_because_its_session_ended_says_so(client, world):
    session = factories.endpoint(world.mine.merchant, url="", kind="pull")
    Endpoint.objects.filter(pk=session.pk).update(listen_session=True)
    delivery = published(session)
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.DEAD, dead_at=utcnow(), last_error=ErrorKind.LISTEN_ENDED
    )
    client.force_login(world.owner)
    text = text_of(
        page(client, "delivery_detail", world.mine.merchant.slug, delivery.pk)
    )
    assert "its listen session ended before its consumer acked it" in text
    assert "no attempt on record" not in text


def test_retry_now_and_replay_on_a_pull_endpoint_speak_of_its_next_pull(
    client, world, pull
):
    delivery = published(pull)
    now = utcnow()
    messages_lease(endpoint=pull, limit=10, now=now)
    messages_nack(endpoint=pull, ids=[delivery.pk], now=now, retry_after_seconds=600)
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    html = page(client, "delivery_detail", slug, delivery.pk)
    assert "hands it to its consumer at its next pull" in html
    response = client.post(
        reverse("portal:delivery_retry_now", args=[slug, delivery.pk]), follow=True
    )
    said = text_of(response.content.decode())
    assert (
        "It is due now, without waiting for its retry time: handed to its consumer at its next pull."
        in said
    )


def test_the_pull_words_name_the_lost_lease_as_leasing_records_it():
    assert words.PULL_LEASE_LOST == leasing.LOST_MESSAGE
    assert words.error_words(
        error_kind=ErrorKind.LEASE_EXPIRED,
        error_message=leasing.LOST_MESSAGE,
        status_code=None,
    ).startswith("Not acked in time")
    # A dispatcher's lost lease keeps its own words.
    assert (
        words.error_words(
            error_kind=ErrorKind.LEASE_EXPIRED,
            error_message="the worker died or lost its lease before recording",
            status_code=None,
        )
        == "The dispatcher sending it stopped before it finished"
    )


def test_no_page_of_a_pull_endpoint_shows_a_machine_code(client, world, pull):
    """Codes (lease_expired, in_flight, listen_ended...) are for the API:
    the pages say them in words, outside <code>."""
    now = utcnow()
    lost = published(pull, due_at=now - timedelta(hours=2))
    messages_lease(endpoint=pull, limit=10, now=now - timedelta(hours=1))
    messages_lease(endpoint=pull, limit=10, now=now)
    messages_nack(endpoint=pull, ids=[lost.pk], now=now, retry_after_seconds=600)
    leased = published(pull)
    messages_lease(endpoint=pull, limit=10, now=utcnow())
    session = factories.endpoint(world.mine.merchant, url="", kind="pull")
    Endpoint.objects.filter(pk=session.pk).update(listen_session=True)
    ended = published(session)
    session_end(endpoint=Endpoint.objects.get(pk=session.pk), why="idle", now=now)
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    pages = [
        ("endpoint_detail", slug, pull.pk),
        ("endpoint_edit", slug, pull.pk),
        ("endpoint_health", slug, pull.pk),
        ("endpoint_deliveries", slug, pull.pk),
        ("endpoint_detail", slug, session.pk),
        ("delivery_detail", slug, lost.pk),
        ("delivery_detail", slug, leased.pk),
        ("delivery_detail", slug, ended.pk),
        ("delivery_list", slug),
        ("endpoint_list", slug),
        ("listen_sessions", slug),
    ]
    for name, *args in pages:
        assert codes_shown(page(client, name, *args)) == [], (name, args)
