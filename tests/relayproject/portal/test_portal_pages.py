"""What the portal pages do, through the Django test client."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from deliveries.signing import serialize_body
from endpoints.models import EndpointHealth, Membership
from endpoints.words import breaker_words
from relayproject.lib.clock import utcnow
from relayproject.portal.present import hourly_chart
from relayproject.portal.selectors import PAGE_SIZE, deliveries_page
from tests.support import factories
from tests.support.portal import dead_delivery


def url(name, side, *extra):
    return reverse(f"portal:{name}", args=[side.merchant.slug, *extra])


def test_send_test_event_reaches_only_that_endpoint(client, world):
    client.force_login(world.owner)
    other = factories.endpoint(world.mine.merchant)
    response = client.post(url("endpoint_test", world.mine, world.mine.endpoint.pk))
    delivery = Delivery.objects.get(event__type="relay.test")
    assert delivery.endpoint_id == world.mine.endpoint.pk
    assert not Delivery.objects.filter(endpoint=other, event__type="relay.test")
    assert response["Location"] == url("delivery_detail", world.mine, delivery.pk)


def test_the_delivery_page_shows_the_request_exactly_as_sent(client, world, receiver):
    client.force_login(world.owner)
    endpoint = factories.endpoint(world.mine.merchant, url=receiver.url)
    client.post(url("endpoint_test", world.mine, endpoint.pk))
    call_command("run_dispatcher", "--drain")
    got = receiver.wait_for(1)[0]
    delivery = Delivery.objects.get(endpoint=endpoint)
    html = client.get(url("delivery_detail", world.mine, delivery.pk)).content.decode()
    for name in (
        "webhook-id",
        "webhook-timestamp",
        "X-Relay-Delivery-Id",
        "X-Relay-Attempt",
        "User-Agent",
    ):
        assert f'<th>{name}</th><td class="mono">{got.headers[name]}</td>' in html
    # The signature is never shown: its fingerprint stands for it.
    assert '<th>webhook-signature</th><td class="mono">redacted, hmac ' in html
    assert got.headers["webhook-signature"] not in html
    event = delivery.event
    body = serialize_body(
        event_id=event.pk,
        event_type=event.type,
        created_at=event.created_at,
        data=event.data,
    )
    assert got.body == body
    assert body.decode().replace('"', "&quot;") in html


def test_the_status_view_reports_the_delivery_as_it_progresses(client, world):
    client.force_login(world.owner)
    response = client.get(url("delivery_status", world.mine, world.mine.delivery.pk))
    assert response.json()["status"] == "dead"
    assert response.json()["last_error"] == "HTTP 500"


def test_a_failed_delivery_page_shows_the_reason_and_the_response(client, world):
    client.force_login(world.owner)
    html = client.get(
        url("delivery_detail", world.mine, world.mine.delivery.pk)
    ).content.decode()
    assert "Not retried because its only attempt failed" in html
    assert "HTTP 500" in html
    assert "boom" in html


def test_replay_puts_a_dead_delivery_back_to_pending(client, world):
    client.force_login(world.owner)
    client.post(url("delivery_replay", world.mine, world.mine.delivery.pk))
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "pending"


def test_replay_of_a_pending_delivery_is_refused_with_a_message(client, world):
    client.force_login(world.owner)
    replay = url("delivery_replay", world.mine, world.mine.delivery.pk)
    client.post(replay)
    response = client.post(replay, follow=True)
    assert "Only dead or succeeded" in response.content.decode()


def test_recover_counts_first_and_changes_nothing_until_confirmed(client, world):
    client.force_login(world.owner)
    recover = url("endpoint_recover", world.mine, world.mine.endpoint.pk)
    since = (utcnow() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    preview = client.post(recover, {"since": since})
    assert "<strong>1</strong> dead delivery" in preview.content.decode()
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "dead"
    client.post(recover, {"since": since, "confirm": "True"})
    assert Delivery.objects.get(pk=world.mine.delivery.pk).status == "pending"


def test_the_secret_is_hidden_until_revealed(client, world):
    client.force_login(world.owner)
    secret = world.mine.endpoint.secrets.get().secret
    detail = url("endpoint_detail", world.mine, world.mine.endpoint.pk)
    assert secret not in client.get(detail).content.decode()
    posted = client.post(url("secret_reveal", world.mine, world.mine.endpoint.pk))
    # Post/redirect/get: the browser ends on the endpoint's page, not the POST
    # URL, so a reload cannot resubmit; the secret shows on that one view.
    assert posted.status_code == 302
    assert posted["Location"] == detail + "#secret"
    assert secret not in posted.content.decode()
    revealed = client.get(detail)
    assert secret in revealed.content.decode()
    assert revealed["Cache-Control"] == "no-store"
    assert secret not in client.get(detail).content.decode()


def test_a_reveal_is_logged_with_user_and_endpoint_but_not_the_secret(
    client, world, caplog
):
    client.force_login(world.owner)
    secret = world.mine.endpoint.secrets.get().secret
    with caplog.at_level(logging.INFO, logger="relayproject.portal"):
        client.post(url("secret_reveal", world.mine, world.mine.endpoint.pk))
    [record] = [r for r in caplog.records if r.name == "relayproject.portal"]
    assert f"by=user {world.owner.pk}" in record.getMessage()
    assert world.mine.endpoint.pk in record.getMessage()
    assert secret not in caplog.text


def test_rotation_lists_both_secrets_with_the_old_ones_expiry(client, world):
    client.force_login(world.owner)
    client.post(url("secret_rotate", world.mine, world.mine.endpoint.pk))
    old, new = world.mine.endpoint.secrets.order_by("created_at", "id")
    html = client.post(
        url("secret_reveal", world.mine, world.mine.endpoint.pk), follow=True
    ).content.decode()
    assert old.secret in html and new.secret in html
    assert f"{old.expires_at:%Y-%m-%d %H:%M} UTC (previous secret)" in html


def test_disable_then_enable(client, world):
    client.force_login(world.owner)
    toggle = url("endpoint_toggle", world.mine, world.mine.endpoint.pk)
    client.post(toggle)
    world.mine.endpoint.refresh_from_db()
    assert not world.mine.endpoint.is_active
    assert "disabled in the portal by owner" == world.mine.endpoint.disabled_reason
    client.post(toggle)
    world.mine.endpoint.refresh_from_db()
    assert world.mine.endpoint.is_active


def test_delete_asks_first_then_deletes(client, world):
    client.force_login(world.owner)
    delete = url("endpoint_delete", world.mine, world.mine.endpoint.pk)
    assert "cannot be undone" in client.get(delete).content.decode()
    client.post(delete)
    assert not world.mine.merchant.endpoints.exists()


def test_the_health_page_shows_percentiles_and_the_breaker_in_words(client, world):
    client.force_login(world.owner)
    html = client.get(
        url("endpoint_health", world.mine, world.mine.endpoint.pk)
    ).content.decode()
    assert '<dd id="p95">12 ms</dd>' in html
    assert "0% of 1 attempt" in html
    assert "<svg" in html


def test_the_switcher_lists_every_merchant_of_the_user(client, world):
    Membership.objects.create(
        user=world.owner, merchant=world.theirs.merchant, role="viewer"
    )
    client.force_login(world.owner)
    html = client.get(url("endpoint_list", world.mine)).content.decode()
    assert reverse("portal:endpoint_list", args=["globex"]) in html


def test_the_log_filters_by_status_and_type(world):
    dead_delivery(world.mine.endpoint, type="refund.sent")
    page = deliveries_page(
        merchant_id=world.mine.merchant.pk, status="dead", event_type="refund.sent"
    )
    assert [d.event.type for d in page.items] == ["refund.sent"]


def test_the_log_pages_newest_first_with_a_cursor(world):
    newer = dead_delivery(world.mine.endpoint, type="refund.sent")
    first = deliveries_page(merchant_id=world.mine.merchant.pk, size=1)
    second = deliveries_page(
        merchant_id=world.mine.merchant.pk, size=1, cursor=first.next_cursor
    )
    assert [d.pk for d in first.items] == [newer.pk]
    assert [d.pk for d in second.items] == [world.mine.delivery.pk]
    assert second.next_cursor is None


def test_the_log_page_links_to_older_deliveries(client, world):
    events_publish(
        merchant=world.mine.merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(PAGE_SIZE)],
    )
    client.force_login(world.owner)
    html = client.get(url("delivery_list", world.mine)).content.decode()
    assert 'rel="next"' in html


T = utcnow().replace(hour=14, minute=2)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({}, "Sending normally"),
        (
            {"consecutive_failures": 3},
            "Sending; 3 failures in a row so far, it pauses at 10",
        ),
        (
            {
                "breaker_state": "open",
                "consecutive_failures": 10,
                "opened_at": T,
                "next_probe_at": T + timedelta(minutes=5),
            },
            "Paused at 14:02 UTC after 10 failures in a row, next try 14:07 UTC. "
            "Nothing is sent and no attempt is spent until then",
        ),
        (
            {
                "breaker_state": "half_open",
                "consecutive_failures": 1,
                "next_probe_at": T,
            },
            "Testing since 14:02 UTC: one delivery decides whether sending resumes",
        ),
    ],
)
def test_breaker_words(fields, words):
    health = EndpointHealth(failure_threshold=10, cooldown_seconds=300, **fields)
    assert words in breaker_words(health)


def test_breaker_words_of_a_disabled_endpoint_do_not_say_deliveries_flow():
    health = EndpointHealth(failure_threshold=10, cooldown_seconds=300)
    assert breaker_words(health, active=False) == (
        "Not in use: the endpoint is disabled, nothing is sent"
    )


def test_the_chart_has_one_bar_pair_per_hour(world):
    from relayproject.portal.selectors import endpoint_window

    window = endpoint_window(endpoint_id=world.mine.endpoint.pk, now=utcnow())
    svg = hourly_chart(window.hours)
    assert svg.count('class="fail"') == 24
    assert sum(h.failures for h in window.hours) == 1
