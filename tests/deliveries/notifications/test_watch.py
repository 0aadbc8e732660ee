"""The endpoint check with an injected clock: what is said once per episode,
auto-disable exactly at its thresholds, held deliveries and re-enabling."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from deliveries.notifications.operational import (
    ENDPOINT_DISABLED,
    ENDPOINT_ENABLED,
    ENDPOINT_FAILING,
)
from deliveries.notifications.services import endpoint_reenable
from deliveries.notifications.watch import watch_run
from endpoints.models import Endpoint, EndpointHealth
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from tests.deliveries.notifications.conftest import T0, attempt, failures, hours, said

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def triggers() -> list[str]:
    return [e.data["trigger"] for e in said(ENDPOINT_FAILING)]


def test_failing_is_said_at_50_and_90_percent_once_each(endpoint, ops_endpoint):
    failures(endpoint, start=T0, end=T0 + hours(40), count=10)
    watch_run(now=T0 + hours(59))
    assert triggers() == []
    watch_run(now=T0 + hours(60))
    watch_run(now=T0 + hours(61))
    assert triggers() == ["no_success_50"]
    watch_run(now=T0 + hours(107))
    assert triggers() == ["no_success_50"]
    watch_run(now=T0 + hours(108))
    watch_run(now=T0 + hours(109))
    assert triggers() == ["no_success_50", "no_success_90"]
    event = said(ENDPOINT_FAILING)[-1]
    assert event.data["merchant"] == "acme"
    assert event.data["endpoint"]["id"] == endpoint.pk
    assert event.data["failed_attempts"] == 10
    assert event.data["failing_since"] == "2026-12-01T00:00:00.000Z"
    assert event.data["auto_disable_at"] == "2026-12-06T00:00:00.000Z"
    assert event.data["last_error"] == "HTTP 500"
    # The operational event goes through the normal pipeline.
    assert Delivery.objects.filter(event=event, endpoint=ops_endpoint).exists()


def test_a_success_ends_the_episode_and_the_next_one_is_said_again(endpoint):
    failures(endpoint, start=T0, end=T0 + hours(10), count=5)
    watch_run(now=T0 + hours(60))
    assert triggers() == ["no_success_50"]
    attempt(endpoint, T0 + hours(61), ok=True)
    watch_run(now=T0 + hours(62))
    assert triggers() == ["no_success_50"]
    failures(endpoint, start=T0 + hours(70), end=T0 + hours(80), count=5)
    watch_run(now=T0 + hours(129))
    assert triggers() == ["no_success_50"]  # only 59 h into the new episode
    watch_run(now=T0 + hours(130))
    assert triggers() == ["no_success_50", "no_success_50"]


def test_an_open_breaker_is_said_once_per_episode(endpoint):
    attempt(endpoint, T0)
    endpoint_breaker_open(endpoint_id=endpoint.pk, reason="10 failures", now=T0)
    watch_run(now=T0 + hours(1))
    watch_run(now=T0 + hours(2))
    assert triggers() == ["breaker_open"]
    assert said(ENDPOINT_FAILING)[0].data["breaker_state"] == "open"


def test_auto_disable_exactly_at_the_threshold_and_not_before(endpoint):
    failures(endpoint, start=T0, end=T0 + hours(12), count=20)
    watch_run(now=T0 + hours(120) - hours(1 / 3600))
    endpoint.refresh_from_db()
    assert endpoint.is_active
    report = watch_run(now=T0 + hours(120))
    endpoint.refresh_from_db()
    assert report.disabled == [endpoint.pk]
    assert not endpoint.is_active
    assert endpoint.disabled_by == "auto-disable"
    assert endpoint.disabled_at == T0 + hours(120)
    assert "no success for 120 h and 20 failed attempts" in endpoint.disabled_reason
    (event,) = said(ENDPOINT_DISABLED)
    assert event.data["by"] == "auto-disable"
    assert event.data["held_deliveries"] == 20
    # Already disabled: the next checks change and say nothing more.
    watch_run(now=T0 + hours(121))
    assert len(said(ENDPOINT_DISABLED)) == 1


@pytest.mark.parametrize(
    ("count", "spread_hours"),
    [(19, 20), (20, 11.9)],
    ids=["one failure short", "failures under 12 hours apart"],
)
def test_no_auto_disable_without_enough_failures_or_spread(
    endpoint, count, spread_hours
):
    failures(endpoint, start=T0, end=T0 + hours(spread_hours), count=count)
    watch_run(now=T0 + hours(500))
    endpoint.refresh_from_db()
    assert endpoint.is_active


def test_staff_exemption_keeps_an_endpoint_enabled(endpoint):
    Endpoint.objects.filter(pk=endpoint.pk).update(auto_disable_exempt=True)
    failures(endpoint, start=T0, end=T0 + hours(20), count=30)
    watch_run(now=T0 + hours(200))
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert said(ENDPOINT_FAILING)[-1].data["auto_disable_at"] is None


def test_held_deliveries_are_released_on_reenable_with_attempts_unchanged(endpoint):
    failures(endpoint, start=T0, end=T0 + hours(20), count=20)
    watch_run(now=T0 + hours(120))
    endpoint.refresh_from_db()
    assert not endpoint.is_active
    before = dict(
        Delivery.objects.filter(endpoint=endpoint).values_list("pk", "attempt_count")
    )
    assert set(
        Delivery.objects.filter(endpoint=endpoint).values_list("status", flat=True)
    ) == {"pending"}
    released = endpoint_reenable(
        endpoint=endpoint, retry_held=True, now=T0 + hours(130)
    )
    assert released == 20
    rows = Delivery.objects.filter(endpoint=endpoint)
    assert dict(rows.values_list("pk", "attempt_count")) == before
    assert {r.next_attempt_at for r in rows} == {T0 + hours(130)}
    assert EndpointHealth.objects.get(pk=endpoint.pk).breaker_state == "closed"
    watch_run(now=T0 + hours(131))
    (enabled,) = said(ENDPOINT_ENABLED)
    assert enabled.data["held_deliveries"] == 20
    # The failures before the re-enable do not disable it again.
    watch_run(now=T0 + hours(200))
    endpoint.refresh_from_db()
    assert endpoint.is_active


def test_disabled_by_whom_and_why(endpoint):
    endpoint_disable(
        endpoint=endpoint, reason="disabled by staff (alice)", by="staff:alice", now=T0
    )
    watch_run(now=T0 + hours(1))
    (event,) = said(ENDPOINT_DISABLED)
    assert event.data["by"] == "staff"
    assert event.data["actor"] == "alice"
    assert event.data["reason"] == "disabled by staff (alice)"
    assert event.data["disabled_at"] == "2026-12-01T00:00:00.000Z"


def test_operational_endpoints_are_never_announced(ops_endpoint):
    failures(ops_endpoint, start=T0, end=T0 + hours(20), count=25)
    endpoint_breaker_open(endpoint_id=ops_endpoint.pk, reason="x", now=T0)
    report = watch_run(now=T0 + hours(120))
    ops_endpoint.refresh_from_db()
    assert report.disabled == [ops_endpoint.pk]  # still auto-disabled
    assert said() == []
