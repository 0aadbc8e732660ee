"""Reads that show delivery failing: portal banners, failing-first lists and
the admin's pipeline-health lines."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Case, Count, F, OuterRef, Q, Subquery, Value, When

from deliveries.models import Delivery
from deliveries.notifications import policy
from deliveries.notifications.operational import OPERATIONAL_MERCHANT_SLUG
from deliveries.notifications.watch import episode_of, held_count, last_error
from deliveries.ops.summary import Alert
from endpoints.models import Endpoint, EndpointHealth

DAY = timedelta(hours=24)
MAX_LINES = 20  # per kind of alert line; the rest is summed up in one more


def is_failing(endpoint: Endpoint) -> bool:
    """Active, and its breaker is not closed or its last attempt failed."""
    health = getattr(endpoint, "health", None)
    if not endpoint.is_active or health is None:
        return False
    if health.breaker_state != EndpointHealth.State.CLOSED:
        return True
    floor = _floor(endpoint)
    return health.last_failure_at is not None and (
        floor is None or health.last_failure_at > floor
    )


def _floor(endpoint: Endpoint) -> datetime | None:
    """Failures before the last success or re-enable no longer count."""
    watch = getattr(endpoint, "watch", None)
    floors = [
        x
        for x in (endpoint.health.last_success_at, watch and watch.reenabled_at)
        if x is not None
    ]
    return max(floors, default=None)


def failing_first(endpoints: Iterable[Endpoint]) -> list[Endpoint]:
    """Failing endpoints first, then disabled ones, then the rest; stable."""

    def rank(endpoint: Endpoint) -> int:
        if is_failing(endpoint):
            return 0
        return 1 if not endpoint.is_active else 2

    return sorted(endpoints, key=rank)


@dataclass(frozen=True)
class Condition:
    """What a banner says about one endpoint; state is "failing" or "disabled"."""

    state: str
    since: datetime | None
    failures: int
    last_error: str
    auto_disable_at: datetime | None
    held: int
    reason: str = ""
    disabled_by: str = ""


def endpoint_condition(*, endpoint: Endpoint, now: datetime) -> Condition | None:
    """None for a healthy endpoint."""
    if not endpoint.is_active:
        return Condition(
            state="disabled",
            since=endpoint.disabled_at,
            failures=0,
            last_error=last_error(endpoint_id=endpoint.pk)["last_error"],
            auto_disable_at=None,
            held=held_count(endpoint_id=endpoint.pk),
            reason=endpoint.disabled_reason,
            disabled_by=endpoint.disabled_by,
        )
    if not is_failing(endpoint):
        return None
    episode = episode_of(endpoint_id=endpoint.pk, after=_floor(endpoint))
    t = policy.Thresholds.from_settings()
    return Condition(
        state="failing",
        since=episode.since if episode else endpoint.health.opened_at,
        failures=episode.failures if episode else 0,
        last_error=last_error(endpoint_id=endpoint.pk)["last_error"],
        auto_disable_at=None
        if endpoint.auto_disable_exempt or episode is None
        else policy.auto_disable_at(episode, t=t),
        held=held_count(endpoint_id=endpoint.pk),
    )


def _capped(lines: list[str], what: str) -> list[str]:
    if len(lines) <= MAX_LINES:
        return lines
    return [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} more {what}."]


def failure_alerts(*, now: datetime) -> list[Alert]:
    """Lines for the operational endpoints' own health (loud: nobody else
    will say it) and for endpoints failing while their breaker is closed
    (open breakers and recent disables have alerts of their own).

    One query, whatever the number of endpoints.
    """
    failing = Q(is_active=True) & (
        Q(health__last_success_at__isnull=True, health__last_failure_at__isnull=False)
        | Q(health__last_failure_at__gt=F("health__last_success_at"))
    )
    operational = Q(merchant__slug=OPERATIONAL_MERCHANT_SLUG)
    dead_24h = (
        Delivery.objects.filter(
            endpoint=OuterRef("pk"),
            merchant_id=OuterRef("merchant_id"),  # one shard on Citus
            status=Delivery.Status.DEAD,
            dead_at__gte=now - DAY,
        )
        .order_by()
        .values("endpoint")
        .annotate(n=Count("pk"))
        .values("n")
    )
    rows = (
        Endpoint.objects.filter(failing | operational)
        .select_related("merchant", "health", "watch")
        .annotate(
            dead_24h=Case(
                When(operational, then=Subquery(dead_24h)),
                default=Value(0),
            )
        )
        .order_by("health__last_success_at", "pk")[:500]
    )
    loud, failing_lines = [], []
    for endpoint in rows:
        if endpoint.merchant.slug == OPERATIONAL_MERCHANT_SLUG:
            loud += _operational_lines(endpoint)
        elif (
            is_failing(endpoint)
            and endpoint.health.breaker_state == EndpointHealth.State.CLOSED
        ):
            failing_lines.append(_failing_line(endpoint))
    return [
        *(Alert("operational_endpoint", line) for line in loud),
        *(
            Alert("endpoint_failing", line)
            for line in _capped(failing_lines, "failing endpoints")
        ),
    ]


def _failing_line(endpoint: Endpoint) -> str:
    h = endpoint.health
    failures = h.consecutive_failures
    if h.last_success_at:
        success = f"last success {h.last_success_at:%Y-%m-%d %H:%M} UTC"
    else:
        success = "it has never succeeded"
    state = ""
    if h.breaker_state == EndpointHealth.State.OPEN:
        state = "paused (nothing is sent until the next try), "
    elif h.breaker_state == EndpointHealth.State.HALF_OPEN:
        state = "paused, one test delivery decides whether sending resumes, "
    return (
        f"Endpoint {endpoint.pk} ({endpoint.url}) of {endpoint.merchant.slug} is "
        f"failing: {state}{failures} failure{'' if failures == 1 else 's'} in a "
        f"row, {success}."
    )


def _operational_lines(endpoint: Endpoint) -> list[str]:
    """A platform that stopped hearing from the relay: said in capitals."""
    lines = []
    if not endpoint.is_active:
        lines.append(
            f"OPERATIONAL ENDPOINT DISABLED: {endpoint.pk} ({endpoint.url}) since "
            f"{endpoint.disabled_at:%Y-%m-%d %H:%M} UTC ({endpoint.disabled_reason}): "
            "the platform receives no operational events."
        )
    elif is_failing(endpoint):
        lines.append(f"OPERATIONAL ENDPOINT FAILING. {_failing_line(endpoint)}")
    if endpoint.dead_24h:
        lines.append(
            f"OPERATIONAL EVENTS DEAD-LETTERED: {endpoint.dead_24h} to {endpoint.pk} "
            "in the last 24 h; the platform missed them (replay them from Dead letters)."
        )
    return lines
