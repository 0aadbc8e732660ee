"""Held reasons: each state of a row against the words shown in the admin and the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.ops.held import HeldKind, delivery_held, when
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories, seed
from tests.support.api import api_as

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def _row(*, now: datetime, state: str) -> Delivery:
    """A delivery of a fresh endpoint put into `state`, seen at `now`."""
    endpoint = factories.endpoint(rate_limit_per_second=None)
    health = endpoint.health
    kwargs: dict = {"status": "pending", "created_at": now - HOUR}
    if state == "breaker_open":
        health.breaker_state = EndpointHealth.State.OPEN
        health.consecutive_failures = 10
        health.opened_at, health.next_probe_at = now - HOUR, now + HOUR
    elif state == "breaker_half_open":
        health.breaker_state = EndpointHealth.State.HALF_OPEN
        health.consecutive_failures = 1
        health.next_probe_at = now + HOUR
    elif state == "disabled":
        endpoint.is_active, endpoint.disabled_reason = False, "410 Gone"
        endpoint.save()
    elif state == "rate_limited":
        endpoint.rate_limit_per_second = 0.5
        endpoint.save()
        # The bucket was emptied just now: a token is two seconds away.
        health.rate_tokens, health.rate_updated_at = 0.0, now.timestamp()
    elif state == "retry":
        kwargs.update(attempts=2, next_attempt_at=now + HOUR)
    elif state == "delivering":
        kwargs.update(status="delivering", created_at=now)  # leased for 5 min
    elif state == "lease_expired":
        kwargs.update(status="delivering")  # its 5 min lease ended 55 min ago
    elif state in ("succeeded", "dead"):
        kwargs.update(status=state, succeeded_at=now if state == "succeeded" else None)
        kwargs.update(dead_at=now if state == "dead" else None)
    health.save()
    return seed.delivery(endpoint, **kwargs)


# state -> (reason, the words, when it may move again)
TABLE = {
    "breaker_open": (
        HeldKind.BREAKER_OPEN,
        "Paused after 10 failures, next try {+1h}",
        "+1h",
    ),
    "breaker_half_open": (
        HeldKind.BREAKER_HALF_OPEN,
        "Paused after 1 failure: one test delivery is being sent, its answer "
        "decides whether sending resumes",
        None,
    ),
    "disabled": (
        HeldKind.ENDPOINT_DISABLED,
        "Held: the endpoint is disabled (410 Gone); it is sent once it is enabled",
        None,
    ),
    "rate_limited": (
        HeldKind.RATE_LIMIT,
        "Held by the rate limit (0.5 a second) until {+2s}",
        "+2s",
    ),
    "retry": (HeldKind.RETRY_SCHEDULED, "Retrying (3 of 10) at {+1h}", "+1h"),
    "due": (
        HeldKind.DUE,
        "Due now (since {-1h}): sent as soon as its endpoint and merchant have a "
        "send slot free",
        None,
    ),
}
OFFSETS = {"+1h": HOUR, "+2s": timedelta(seconds=2), "-1h": -HOUR}


def _expected(text: str, until: str | None, now: datetime):
    for key, offset in OFFSETS.items():
        text = text.replace("{" + key + "}", when(now + offset, now=now))
    return text, (now + OFFSETS[until] if until else None)


@pytest.mark.parametrize("state", list(TABLE))
def test_held_reason_names_what_holds_the_row(state):
    now = datetime(2026, 12, 3, 14, 0, 5, tzinfo=UTC)
    delivery = _row(now=now, state=state)
    reason, text, until = TABLE[state]

    held = delivery_held(delivery=Delivery.objects.get(pk=delivery.pk), now=now)

    assert (held.reason, held.text, held.until) == (
        reason,
        *_expected(text, until, now),
    )


@pytest.mark.parametrize("state", ["succeeded", "dead"])
def test_finished_rows_are_not_held(state):
    now = utcnow()
    assert delivery_held(delivery=_row(now=now, state=state), now=now) is None


def test_delivering_row_names_its_worker_and_lease():
    now = datetime(2026, 12, 3, 14, 0, 5, tzinfo=UTC)
    held = delivery_held(delivery=_row(now=now, state="delivering"), now=now)
    assert held.reason == HeldKind.IN_FLIGHT
    assert held.text == "Being sent now (by w1, claimed until 14:05:05 UTC)"


def test_delivering_row_whose_lease_ran_out_is_due():
    now = datetime(2026, 12, 3, 14, 0, 5, tzinfo=UTC)
    held = delivery_held(delivery=_row(now=now, state="lease_expired"), now=now)
    assert held.reason == HeldKind.DUE
    assert held.text == (
        "Its dispatcher (w1) stopped answering at 13:05:05 UTC: the next claim "
        "takes it over"
    )


def test_times_on_another_day_carry_the_date():
    now = datetime(2026, 12, 3, 23, 59, tzinfo=UTC)
    assert when(now + HOUR, now=now) == "2026-12-04 00:59:00 UTC"


# The admin and the API read the wall clock: rows are set an hour either side
# of it, so only the rate limit's seconds could shift, and it is left out.
SHOWN = ["breaker_open", "breaker_half_open", "disabled", "retry", "due"]


@pytest.mark.parametrize("state", SHOWN)
def test_api_returns_the_held_reason(state):
    now = utcnow()
    delivery = _row(now=now, state=state)
    reason, text, until = TABLE[state]

    body = api_as(None).get(f"/deliveries/{delivery.pk}").json()

    assert body["held"]["reason"] == reason.value
    assert body["held"]["text"] == _expected(text, until, now)[0]
    assert (body["held"]["until"] is None) == (until is None)


def test_api_held_is_null_once_finished():
    delivery = _row(now=utcnow(), state="succeeded")
    assert api_as(None).get(f"/deliveries/{delivery.pk}").json()["held"] is None


@pytest.mark.parametrize("state", SHOWN)
def test_admin_list_and_page_show_the_held_reason(admin_client, state):
    now = utcnow()
    delivery = _row(now=now, state=state)
    text = _expected(*TABLE[state][1:], now)[0]

    listing = admin_client.get(reverse("admin:deliveries_delivery_changelist"))
    page = admin_client.get(
        reverse("admin:deliveries_delivery_change", args=[delivery.pk])
    )

    assert text in listing.content.decode()
    assert text in page.content.decode()
