"""relay.delivery.dead coalesces: one event per endpoint per window, carrying
the count and the first and last delivery ids; never about operational ones."""

from __future__ import annotations

from datetime import timedelta

import pytest

from deliveries.models import Delivery
from deliveries.notifications.deadletters import (
    dead_letters_announce,
    dead_letters_collect,
)
from deliveries.notifications.operational import DELIVERY_DEAD
from tests.deliveries.notifications.conftest import T0, attempt, said

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def kill(endpoint, at, n: int) -> list[str]:
    ids = []
    for i in range(n):
        delivery = attempt(endpoint, at, status=400).delivery
        Delivery.objects.filter(pk=delivery.pk).update(
            status="dead", dead_at=at + timedelta(milliseconds=i), last_error="HTTP 400"
        )
        ids.append(delivery.pk)
    return ids


def check(now) -> list[str]:
    dead_letters_collect(now=now)
    return dead_letters_announce(now=now)


def s(n: float) -> timedelta:
    return timedelta(seconds=n)


def test_a_burst_of_50_is_one_event_with_the_count_and_edges(endpoint):
    ids = kill(endpoint, T0, 50)
    assert check(T0 + s(5)) == []  # the window is still open
    assert check(T0 + s(60)) == [endpoint.pk]
    (event,) = said(DELIVERY_DEAD)
    assert event.data["count"] == 50
    assert event.data["first_delivery_id"] == ids[0]
    assert event.data["last_delivery_id"] == ids[-1]
    assert event.data["endpoint"]["id"] == endpoint.pk
    assert event.data["last_error"] == "HTTP 400"
    assert check(T0 + s(300)) == []


def test_at_most_one_event_per_window_and_later_ones_counted(endpoint):
    kill(endpoint, T0, 3)
    check(T0 + s(10))
    check(T0 + s(61))
    kill(endpoint, T0 + s(70), 2)  # 9 s after the first event
    assert check(T0 + s(100)) == []
    kill(endpoint, T0 + s(110), 1)
    assert check(T0 + s(121)) == []  # 60 s since the first event, but 51 since 70
    assert check(T0 + s(130)) == [endpoint.pk]
    assert [e.data["count"] for e in said(DELIVERY_DEAD)] == [3, 3]


def test_dead_operational_deliveries_say_nothing(ops_endpoint):
    kill(ops_endpoint, T0, 5)
    assert check(T0 + s(120)) == []
    assert said() == []
