"""Look at endpoints and say what changed: failing, disabled, enabled; and
disable the ones that have failed for days.

An ended listen session (disabled_by "listen", deliveries/pull/sessions.py)
is not announced as a disabled endpoint: its `listen` stopped, nothing is
wrong. Its dead letters are announced as any endpoint's (deadletters.py).

Each endpoint is handled in its own short transaction under a lock on its
watch row, so two processes that run this at once say everything once; the
maintenance slot (step.py) normally keeps it to one process a minute anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import Count, F, Max, Min, Q

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.notifications import policy
from deliveries.notifications.announce import announce
from deliveries.notifications.models import EndpointWatch, Kind
from deliveries.notifications.operational import (
    ENDPOINT_DISABLED,
    ENDPOINT_ENABLED,
    ENDPOINT_FAILING,
    disabled_by_part,
    endpoint_part,
    health_part,
    ts,
)
from deliveries.pull.sessions import ENDED_BY as SESSION_ENDED_BY
from endpoints.merchant_keyed import pinned
from endpoints.models import Endpoint, EndpointHealth
from endpoints.services import endpoint_disable

AUTO_DISABLE_BY = "auto-disable"


@dataclass
class WatchReport:
    looked_at: int = 0
    said: list[tuple[str, str]] = field(default_factory=list)  # (type, endpoint)
    disabled: list[str] = field(default_factory=list)


def endpoints_to_watch() -> list[str]:
    """Endpoints where something may have changed; the rest cost nothing."""
    failing = Q(health__last_failure_at__isnull=False) & (
        Q(health__last_success_at__isnull=True)
        | Q(health__last_failure_at__gt=F("health__last_success_at"))
    )
    breaker = Q(health__isnull=False) & ~Q(
        health__breaker_state=EndpointHealth.State.CLOSED
    )
    episode_open = Q(watch__episode_started_at__isnull=False)
    disabled_unsaid = (
        Q(is_active=False, disabled_at__isnull=False)
        & ~Q(disabled_by=SESSION_ENDED_BY)
        & (
            Q(watch__isnull=True)
            | Q(watch__said_disabled_at__isnull=True)
            | ~Q(watch__said_disabled_at=F("disabled_at"))
        )
    )
    reenabled = Q(is_active=True, watch__said_disabled_at__isnull=False)
    return list(
        Endpoint.objects.filter(
            (Q(is_active=True) & (failing | breaker | episode_open))
            | disabled_unsaid
            | reenabled
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def episode_of(*, endpoint_id: str, after: datetime | None) -> policy.Episode | None:
    """The failed attempts after `after` (the last success or re-enable).

    Lost leases are the dispatcher's fault, not the endpoint's: not counted.
    """
    failed = Attempt.objects.filter(endpoint_id=endpoint_id).exclude(
        Q(outcome=Attempt.Outcome.SUCCEEDED) | Q(error_kind=ErrorKind.LEASE_EXPIRED)
    )
    if after is not None:
        failed = failed.filter(started_at__gt=after)
    row = failed.aggregate(
        n=Count("pk"), first=Min("started_at"), last=Max("started_at")
    )
    if not row["n"]:
        return None
    return policy.Episode(since=row["first"], last=row["last"], failures=row["n"])


def last_error(*, endpoint_id: str) -> dict:
    row = (
        Attempt.objects.filter(endpoint_id=endpoint_id)
        .exclude(outcome=Attempt.Outcome.SUCCEEDED)
        .order_by("-started_at")
        .values("status_code", "error_kind", "error_message", "started_at")
        .first()
    )
    if row is None:
        return {"last_error": "", "last_status_code": None}
    kind = "" if row["error_kind"] == ErrorKind.HTTP_STATUS else row["error_kind"]
    text = row["error_message"] or kind
    if row["status_code"]:
        text = f"HTTP {row['status_code']}" + (f": {text}" if text else "")
    return {"last_error": text[:300], "last_status_code": row["status_code"]}


def held_count(*, endpoint_id: str) -> int:
    return Delivery.objects.filter(
        endpoint_id=endpoint_id, status=Delivery.Status.PENDING
    ).count()


def _locked_watch(endpoint_id: str) -> EndpointWatch:
    EndpointWatch.objects.bulk_create(
        [EndpointWatch(endpoint_id=endpoint_id)], ignore_conflicts=True
    )
    return (
        pinned(EndpointWatch.objects, endpoint_id)
        .select_for_update()
        .get(pk=endpoint_id)
    )


def _new_episode(watch: EndpointWatch, since: datetime | None) -> None:
    watch.episode_started_at = since
    watch.said_breaker_open = False
    watch.said_half_window = False
    watch.said_late_window = False


def _base(endpoint: Endpoint, health: EndpointHealth | None) -> dict:
    return {
        "merchant": endpoint.merchant.slug,
        "endpoint": endpoint_part(endpoint),
        **health_part(health),
    }


def watch_endpoint(
    endpoint_id: str, *, now: datetime, t: policy.Thresholds, report: WatchReport
) -> None:
    with transaction.atomic():
        watch = _locked_watch(endpoint_id)
        endpoint = (
            Endpoint.objects.select_related("merchant", "health")
            .filter(pk=endpoint_id)
            .first()
        )
        if endpoint is None:
            return
        health = getattr(endpoint, "health", None)
        said: list[tuple[str, dict, str | None]] = []
        if endpoint.is_active and watch.said_disabled_at is not None:
            watch.said_disabled_at = None
            watch.reenabled_at = now
            _new_episode(watch, None)
            said.append(
                (
                    ENDPOINT_ENABLED,
                    {
                        "enabled_at": ts(now),
                        "held_deliveries": held_count(endpoint_id=endpoint.pk),
                    },
                    Kind.ENABLED,
                )
            )
        if endpoint.is_active:
            said += _failing(endpoint, health, watch, now=now, t=t, report=report)
        if (
            not endpoint.is_active
            and endpoint.disabled_at is not None
            and endpoint.disabled_by != SESSION_ENDED_BY
            and watch.said_disabled_at != endpoint.disabled_at
        ):
            watch.said_disabled_at = endpoint.disabled_at
            said.append(
                (
                    ENDPOINT_DISABLED,
                    {
                        "disabled_at": ts(endpoint.disabled_at),
                        "reason": endpoint.disabled_reason,
                        **disabled_by_part(endpoint.disabled_by),
                        "held_deliveries": held_count(endpoint_id=endpoint.pk),
                        **last_error(endpoint_id=endpoint.pk),
                    },
                    Kind.DISABLED,
                )
            )
        for event_type, data, kind in said:
            announce(
                endpoint=endpoint,
                watch=watch,
                event_type=event_type,
                data={**_base(endpoint, health), **data},
                now=now,
                email_kind=kind,
            )
            report.said.append((event_type, endpoint.pk))
        watch.save()
    report.looked_at += 1


def _failing(
    endpoint: Endpoint,
    health: EndpointHealth | None,
    watch: EndpointWatch,
    *,
    now: datetime,
    t: policy.Thresholds,
    report: WatchReport,
) -> list[tuple[str, dict, str | None]]:
    """What to say about an active endpoint's failing episode; may disable it."""
    floors = [
        x
        for x in (health and health.last_success_at, watch.reenabled_at)
        if x is not None
    ]
    episode = episode_of(endpoint_id=endpoint.pk, after=max(floors, default=None))
    if episode is None:
        if watch.episode_started_at is not None:
            _new_episode(watch, None)  # a success (or a re-enable) ended it
        return []
    if watch.episode_started_at != episode.since:
        _new_episode(watch, episode.since)
    triggers = []
    breaker_open = health is not None and health.breaker_state != health.State.CLOSED
    if breaker_open and not watch.said_breaker_open:
        watch.said_breaker_open = True
        triggers.append("breaker_open")
    fraction = policy.warning_due(episode, now=now, t=t)
    if fraction is not None and fraction >= 0.9 and not watch.said_late_window:
        # Both at once (the relay was down): the later warning says it all.
        watch.said_late_window = watch.said_half_window = True
        triggers.append("no_success_90")
    elif fraction is not None and not watch.said_half_window:
        watch.said_half_window = True
        triggers.append("no_success_50")
    said = []
    details = {
        "failing_since": ts(episode.since),
        "failed_attempts": episode.failures,
        "auto_disable_at": None
        if endpoint.auto_disable_exempt
        else ts(policy.auto_disable_at(episode, t=t)),
        **last_error(endpoint_id=endpoint.pk),
    }
    for trigger in triggers[-1:]:  # one event per pass, naming the latest reason
        said.append((ENDPOINT_FAILING, {"trigger": trigger, **details}, Kind.FAILING))
    if not endpoint.auto_disable_exempt and policy.auto_disable_due(
        episode, now=now, t=t
    ):
        reason = (
            f"auto-disabled: no success for {episode.elapsed(now).total_seconds() / 3600:.0f} h "
            f"and {episode.failures} failed attempts"
        )
        # Conditional, so a disable by anyone else in between is not overwritten.
        if endpoint_disable(
            endpoint=endpoint, reason=reason, by=AUTO_DISABLE_BY, now=now
        ):
            report.disabled.append(endpoint.pk)
            return []  # "disabled" says it all; a warning now would be noise
    return said


def watch_run(*, now: datetime, t: policy.Thresholds | None = None) -> WatchReport:
    """One pass over the endpoints that may have changed."""
    t = t or policy.Thresholds.from_settings()
    report = WatchReport()
    for endpoint_id in endpoints_to_watch():
        watch_endpoint(endpoint_id, now=now, t=t, report=report)
    return report
