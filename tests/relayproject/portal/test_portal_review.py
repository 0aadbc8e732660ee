"""Each row of the Chromium review in issue 11, as a test, and the bulk replay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.models import Attempt, Delivery
from deliveries.replay import delivery_replay
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointHealth
from endpoints.words import breaker_words
from relayproject.lib.clock import utcnow
from relayproject.portal.present import hourly_chart
from relayproject.portal.selectors import deliveries_page
from tests.support.portal import dead_delivery


def url(name, side, *extra):
    return reverse(f"portal:{name}", args=[side.merchant.slug, *extra])


def test_a_replayed_succeeded_delivery_does_not_say_it_failed(client, world):
    delivery = world.mine.delivery
    Delivery.objects.filter(pk=delivery.pk).update(
        status="succeeded", last_status_code=200, last_error=""
    )
    Attempt.objects.filter(delivery=delivery).update(
        outcome="succeeded", status_code=200
    )
    delivery_replay(delivery_id=delivery.pk, now=utcnow())
    client.force_login(world.owner)
    html = client.get(url("delivery_detail", world.mine, delivery.pk)).content.decode()
    summary = html.split('id="summary"', 1)[1].split("</p>", 1)[0]
    assert "failed" not in summary
    assert "previous attempt succeeded (HTTP 200)" in summary


def test_delete_names_the_endpoint_deleted(client, world):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint
    response = client.post(url("endpoint_delete", world.mine, endpoint.pk), follow=True)
    text = response.content.decode()
    assert "Endpoint None deleted" not in text
    assert f"Endpoint {endpoint.pk} ({endpoint.url}) deleted." in text


def test_the_list_does_not_say_no_traffic_beside_failures(client, world):
    EndpointHealth.objects.filter(endpoint=world.mine.endpoint).update(
        consecutive_failures=4, last_failure_at=utcnow()
    )
    client.force_login(world.owner)
    html = client.get(url("endpoint_list", world.mine)).content.decode()
    assert "no traffic yet" not in html
    assert "4 failures in a row" in html


def test_the_breaker_reason_is_said_once():
    now = utcnow()
    health = EndpointHealth(
        failure_threshold=10,
        cooldown_seconds=300,
        breaker_state="open",
        consecutive_failures=10,
        opened_at=now,
        next_probe_at=now + timedelta(minutes=5),
        breaker_reason="opened after 10 consecutive failures (last: http 500)",
    )
    words = breaker_words(health)
    assert words.count("10 failures") == 1
    assert "consecutive" not in words
    assert "(last: HTTP 500 Internal Server Error)" in words and "next try" in words


def test_deliveries_are_found_by_event_or_delivery_id(client, world):
    other = dead_delivery(world.mine.endpoint, type="refund.sent")
    client.force_login(world.owner)
    log = url("delivery_list", world.mine)
    for q in (other.pk, other.event_id):
        html = client.get(log, {"q": q}).content.decode()
        assert other.pk in html and world.mine.delivery.pk not in html


def test_a_wildcard_type_filter_finds_what_a_subscription_would(world):
    dead_delivery(world.mine.endpoint, type="invoice.paid")
    dead_delivery(world.mine.endpoint, type="invoice.sent.late")
    page = deliveries_page(merchant_id=world.mine.merchant.pk, event_type="invoice.*")
    assert sorted(d.event.type for d in page.items) == [
        "invoice.paid",
        "invoice.sent.late",
    ]


def test_since_after_until_is_an_error_beside_until(client, world):
    client.force_login(world.owner)
    response = client.get(
        url("delivery_list", world.mine),
        {"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    block = html.split('data-field="until"', 1)[1].split('<div class="field', 1)[0]
    assert "Until must be later than since" in block


def test_page_two_links_to_newer_and_to_the_first_page(client, world, monkeypatch):
    monkeypatch.setattr("relayproject.portal.selectors.PAGE_SIZE", 2)
    events_publish(
        merchant=world.mine.merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(4)],
    )
    client.force_login(world.owner)
    log = url("delivery_list", world.mine)
    first = client.get(log).content.decode()
    assert 'id="page-older"' in first and 'id="page-newer"' not in first
    older = first.split('id="page-older"', 1)[0].rsplit('href="', 1)[1].split('"')[0]
    second = client.get(log + older.replace("&amp;", "&")).content.decode()
    assert 'id="page-newer"' in second and 'id="page-first"' in second
    newer = second.split('id="page-newer"', 1)[0].rsplit('href="', 1)[1].split('"')[0]
    back = client.get(log + newer.replace("&amp;", "&")).content.decode()
    assert back.count('class="mono" href=') == first.count('class="mono" href=')


def test_the_chart_axis_has_dates_and_an_empty_chart_claims_no_peak(world):
    from relayproject.portal.selectors import HourBucket

    start = utcnow().replace(minute=0, second=0, microsecond=0)
    hours = [HourBucket(start + timedelta(hours=i), 0, 0) for i in range(24)]
    svg = hourly_chart(hours)
    assert "peak" not in svg and "no attempts in the last 24 h" in svg
    assert f"{hours[0].start:%b %-d}" in svg and "UTC" in svg


def test_reveal_fills_the_snippets_with_the_real_secret(client, world):
    client.force_login(world.owner)
    detail = url("endpoint_detail", world.mine, world.mine.endpoint.pk)
    secret = world.mine.endpoint.secrets.get().secret
    assert 'Webhook("whsec_…")' in client.get(detail).content.decode()
    html = client.post(
        url("secret_reveal", world.mine, world.mine.endpoint.pk), follow=True
    ).content.decode()
    assert f'Webhook("{secret}")' in html
    assert f'data-copy="{secret}"' in html


def test_every_page_has_a_skip_link_and_marks_the_current_page(client, world):
    client.force_login(world.owner)
    html = client.get(url("delivery_list", world.mine)).content.decode()
    assert '<a class="skip" href="#main">' in html and 'id="main"' in html
    assert 'aria-current="page">Deliveries' in html
    html = client.get(
        url("endpoint_health", world.mine, world.mine.endpoint.pk)
    ).content.decode()
    assert 'aria-current="page">Health' in html


def test_recover_counts_in_good_english(client, world):
    client.force_login(world.owner)
    response = client.post(
        url("endpoint_recover", world.mine, world.mine.endpoint.pk),
        {"since": "2000-01-01T00:00", "confirm": "True"},
        follow=True,
    )
    assert "1 dead delivery is pending again." in response.content.decode()


def test_the_test_event_page_offers_a_real_event_type(client, world):
    client.force_login(world.owner)
    html = client.get(
        url("endpoint_detail", world.mine, world.mine.endpoint.pk)
    ).content.decode()
    assert url("endpoint_example", world.mine, world.mine.endpoint.pk) in html


# -- bulk replay ---------------------------------------------------------


def test_bulk_replay_shows_the_count_then_replays_the_filtered_dead(client, world):
    kept = dead_delivery(world.mine.endpoint, type="refund.sent")
    client.force_login(world.owner)
    bulk = url("deliveries_bulk_replay", world.mine)
    html = client.post(bulk, {"event_type": "order.*"}).content.decode()
    assert 'id="bulk-count"><strong>1</strong> dead delivery' in html
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "dead"
    client.post(bulk, {"event_type": "order.*", "confirm": "yes"})
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "pending"
    assert Delivery.objects.get(pk=kept.pk).status == "dead"
    assert not Delivery.objects.filter(endpoint=world.theirs.endpoint, status="pending")


def test_bulk_replay_is_capped_per_request(client, world, monkeypatch):
    monkeypatch.setattr("deliveries.replay.BULK_REPLAY_CAP", 2)
    for _ in range(3):
        dead_delivery(world.mine.endpoint)
    client.force_login(world.owner)
    bulk = url("deliveries_bulk_replay", world.mine)
    assert "the newest 2 of the 4" in client.post(bulk, {}).content.decode()
    response = client.post(bulk, {"confirm": "yes"}, follow=True)
    assert "2 more match" in response.content.decode()
    assert (
        Delivery.objects.filter(endpoint=world.mine.endpoint, status="pending").count()
        == 2
    )


@pytest.mark.parametrize("role", ["viewer"])
def test_a_viewer_cannot_bulk_replay(client, world, role):
    client.force_login(world.viewer)
    response = client.post(
        url("deliveries_bulk_replay", world.mine), {"confirm": "yes"}
    )
    assert response.status_code == 403
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "dead"


def test_a_delivery_held_by_an_open_breaker_says_so_and_until_when(client, world):
    probe = utcnow() + timedelta(minutes=5)
    Delivery.objects.filter(pk=world.mine.delivery.pk).update(
        status="pending", next_attempt_at=utcnow()
    )
    EndpointHealth.objects.filter(endpoint=world.mine.endpoint).update(
        breaker_state="open", opened_at=utcnow(), next_probe_at=probe
    )
    client.force_login(world.owner)
    detail = client.get(
        url("delivery_detail", world.mine, world.mine.delivery.pk)
    ).content.decode()
    # The time, with the day before it when the probe falls on another day
    # (a run near midnight): the words and the time are what this checks.
    assert "Paused, next try " in detail
    assert f"{probe:%H:%M:%S} UTC" in detail
    listing = client.get(url("delivery_list", world.mine)).content.decode()
    assert "Paused, next try" in listing


def test_a_delivery_held_by_a_disabled_endpoint_says_so(client, world):
    Delivery.objects.filter(pk=world.mine.delivery.pk).update(status="pending")
    client.force_login(world.owner)
    client.post(url("endpoint_toggle", world.mine, world.mine.endpoint.pk))
    detail = client.get(
        url("delivery_detail", world.mine, world.mine.delivery.pk)
    ).content.decode()
    assert "Held: the endpoint is disabled" in detail
