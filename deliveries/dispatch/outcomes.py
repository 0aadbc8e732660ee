"""Record what a send did: the attempt, the delivery, the endpoint's health.

One short transaction per flush, never spanning a send. Fencing: a delivery
row changes only while this worker still holds the lease it was claimed
with, so a worker whose lease was taken over cannot overwrite the new owner.
"""

from __future__ import annotations

import logging
import random
from collections import Counter as Tally
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from deliveries import retry
from deliveries.dispatch import prepared
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.ops import counters
from deliveries.publish.sanitize import storable_text
from deliveries.retry import is_success
from endpoints import breaker
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib.tracing import span_event

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sent:
    """A delivery as it was claimed, and what its send returned."""

    delivery_id: str
    endpoint_id: str
    lease_until: datetime
    attempt_count: int  # at claim time
    budget_start: int
    max_attempts: int
    is_probe: bool
    started_at: datetime
    result: SendResult
    event_id: str = ""
    merchant_id: int | None = None
    published_at: datetime | None = None  # the event's created_at
    permanent_statuses: frozenset[int] = frozenset()


@dataclass
class Recorded:
    fenced: list[str] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    # Endpoints whose breaker is open after this flush, with the next probe time.
    opened: dict[str, datetime] = field(default_factory=dict)
    # Endpoints whose health row this flush locked and left closed.
    closed: set[str] = field(default_factory=set)


SUCCESS_MARK_SECONDS = 1.0  # last_success_at of a healthy endpoint, at most this often


def outcomes_record(
    *, sent: list[Sent], worker_id: str, now: datetime, rand: random.Random
) -> Recorded:
    """Record a flush in one transaction that runs SQL only; log after commit."""
    recorded = Recorded()
    if not sent:
        return recorded
    verdicts = {item.delivery_id: _verdict(item) for item in sent}
    with transaction.atomic():
        healths = _health_rows_locked(_endpoints_to_lock(sent))
        attempts: list[Attempt] = []
        gone: set[str] = set()
        updated = _update_deliveries(
            [(item, verdicts[item.delivery_id]) for item in sent],
            worker_id=worker_id,
            now=now,
            rand=rand,
        )
        healthy_successes: set[str] = set()
        for item in sent:
            verdict = verdicts[item.delivery_id]
            if item.delivery_id not in updated:
                recorded.fenced.append(item.delivery_id)
                continue
            attempts.append(_attempt_row(item, verdict, worker_id=worker_id))
            health = healths.get(item.endpoint_id)
            if health is not None:
                _apply_breaker(health, item, now=now)
            else:
                healthy_successes.add(item.endpoint_id)
            if verdict == retry.Verdict.GONE:
                gone.add(item.endpoint_id)
            _count(recorded.tally, item, verdict)
        Attempt.objects.bulk_create(attempts)
        for health in healths.values():
            health.save(update_fields=_HEALTH_FIELDS)
            if health.breaker_state != EndpointHealth.State.CLOSED:
                recorded.opened[health.pk] = health.next_probe_at or now
            else:
                recorded.closed.add(health.pk)
        _mark_successes(healthy_successes, now=now)
        if gone:
            Endpoint.objects.filter(pk__in=gone, is_active=True).update(
                is_active=False,
                disabled_reason="the receiver answered 410 Gone",
                disabled_at=now,
                disabled_by="receiver",
            )
        counters.counters_add(shard=worker_id, tally=recorded.tally)
    for item in sent:
        if item.delivery_id in recorded.fenced:
            logger.warning(
                "fenced delivery=%s: lease taken over, outcome dropped",
                item.delivery_id,
            )
        else:
            _log(item, verdicts[item.delivery_id])
    return recorded


def _endpoints_to_lock(sent: list[Sent]) -> list[str]:
    """Endpoints whose health row this flush must lock and rewrite, in key order.

    A success on an endpoint whose breaker is closed with no failures counted
    changes nothing but last_success_at, so that row is read, not locked: hot
    endpoints do not serialise the dispatchers recording for them. Failures,
    probes and any breaker not at rest take the lock (the counters stay exact).
    """
    endpoint_ids = {s.endpoint_id for s in sent}
    eventful = {
        s.endpoint_id
        for s in sent
        if s.is_probe or not is_success(s.result.status_code)
    }
    at_rest = set(
        EndpointHealth.objects.filter(
            pk__in=endpoint_ids - eventful,
            breaker_state=EndpointHealth.State.CLOSED,
            consecutive_failures=0,
        ).values_list("pk", flat=True)
    )
    # Primary-key order, so two dispatchers locking the same rows cannot deadlock.
    return sorted(endpoint_ids - at_rest)


def _mark_successes(endpoint_ids: set[str], *, now: datetime) -> None:
    """last_success_at of endpoints at rest, only where it is over a second old:
    the condition keeps a hot endpoint's row from being rewritten per flush."""
    if endpoint_ids:
        EndpointHealth.objects.filter(pk__in=endpoint_ids).filter(
            Q(last_success_at__isnull=True)
            | Q(last_success_at__lt=now - timedelta(seconds=SUCCESS_MARK_SECONDS))
        ).update(last_success_at=now)


def _health_rows_locked(endpoint_ids: list[str]) -> dict[str, EndpointHealth]:
    """Lock the health rows, creating any that endpoints made outside the services lack."""

    def lock(ids: list[str]) -> dict[str, EndpointHealth]:
        rows = (
            EndpointHealth.objects.select_for_update().filter(pk__in=ids).order_by("pk")
        )
        return {h.pk: h for h in rows}

    healths = lock(endpoint_ids)
    missing = [e for e in endpoint_ids if e not in healths]
    if missing:
        EndpointHealth.objects.bulk_create(
            [
                EndpointHealth(
                    endpoint_id=e,
                    failure_threshold=settings.BREAKER_FAILURE_THRESHOLD,
                    cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
                )
                for e in missing
            ],
            ignore_conflicts=True,
        )
        healths.update(lock(missing))
    return healths


def _verdict(item: Sent) -> retry.Verdict:
    verdict = retry.classify(
        status_code=item.result.status_code,
        error_kind=item.result.error_kind,
        permanent=item.permanent_statuses,
    )
    used = item.attempt_count + 1 - item.budget_start
    if verdict == retry.Verdict.RETRY and used >= item.max_attempts:
        return retry.Verdict.DEAD
    return verdict


_COLUMNS = (
    ("id", "text"),
    ("lease_until", "timestamptz"),
    ("attempt_count", "integer"),
    ("last_attempt_at", "timestamptz"),
    ("last_status_code", "integer"),
    ("last_error", "text"),
    ("last_response_ms", "double precision"),
    ("status", "text"),
    ("succeeded_at", "timestamptz"),
    ("dead_at", "timestamptz"),
    ("next_attempt_at", "timestamptz"),
)


def _update_deliveries(
    items: list[tuple[Sent, retry.Verdict]],
    *,
    worker_id: str,
    now: datetime,
    rand: random.Random,
) -> set[str]:
    """One fenced UPDATE ... FROM unnest(...) for the whole flush; returns ids updated."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return {
            item.delivery_id
            for item, verdict in items
            if _update_delivery(item, verdict, worker_id=worker_id, now=now, rand=rand)
        }
    columns: list[list] = [[] for _ in _COLUMNS]
    for item, verdict in items:
        f = _delivery_fields(item, verdict, now=now, rand=rand)
        row = [
            item.delivery_id,
            item.lease_until,
            f["attempt_count"],
            f["last_attempt_at"],
            f["last_status_code"],
            f["last_error"],
            f["last_response_ms"],
            f["status"],
            f.get("succeeded_at"),
            f.get("dead_at"),
            f.get("next_attempt_at"),
        ]
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    with prepared.statements(), connection.cursor() as cursor:
        cursor.execute(_UPDATE_SQL, [*columns, worker_id])
        return {r[0] for r in cursor.fetchall()}


# One array per column (unnest), not VALUES rows: the statement's text is the
# same for every flush, so a dispatcher's session prepares it once.
_UPDATE_SQL = (
    f"UPDATE {Delivery._meta.db_table} AS d SET attempt_count = v.attempt_count, "
    "last_attempt_at = v.last_attempt_at, last_status_code = v.last_status_code, "
    "last_error = v.last_error, last_response_ms = v.last_response_ms, "
    "status = v.status, claimed_by = '', claimed_until = NULL, "
    "succeeded_at = COALESCE(v.succeeded_at, d.succeeded_at), "
    "dead_at = COALESCE(v.dead_at, d.dead_at), "
    "next_attempt_at = COALESCE(v.next_attempt_at, d.next_attempt_at) "
    "FROM unnest("
    + ", ".join(f"%s::{t}[]" for _, t in _COLUMNS)
    + f") AS v({', '.join(n for n, _ in _COLUMNS)}) "
    "WHERE d.id = v.id AND d.status = 'delivering' AND d.claimed_by = %s "
    "AND d.claimed_until = v.lease_until RETURNING d.id"
)


def _delivery_fields(
    item: Sent, verdict: retry.Verdict, *, now: datetime, rand: random.Random
) -> dict:
    result = item.result
    fields: dict = {
        "attempt_count": item.attempt_count + 1,
        "last_attempt_at": item.started_at,
        "last_status_code": result.status_code,
        "last_error": _error_text(result),
        "last_response_ms": result.duration_ms,
        "claimed_by": "",
        "claimed_until": None,
    }
    if verdict == retry.Verdict.SUCCEEDED:
        fields.update(status=Delivery.Status.SUCCEEDED, succeeded_at=now)
    elif verdict == retry.Verdict.RETRY:
        delay = retry.next_delay(
            failed_attempts=item.attempt_count + 1 - item.budget_start,
            status_code=result.status_code,
            retry_after_header=result.retry_after,
            base=settings.RETRY_BASE_SECONDS,
            max_delay=settings.RETRY_MAX_DELAY_SECONDS,
            rand=rand,
            now=now,
        )
        fields.update(
            status=Delivery.Status.PENDING,
            next_attempt_at=now + timedelta(seconds=delay),
        )
    else:
        fields.update(status=Delivery.Status.DEAD, dead_at=now)
    return fields


def _update_delivery(
    item: Sent,
    verdict: retry.Verdict,
    *,
    worker_id: str,
    now: datetime,
    rand: random.Random,
) -> bool:
    fields = _delivery_fields(item, verdict, now=now, rand=rand)
    return bool(
        Delivery.objects.filter(
            pk=item.delivery_id,
            status=Delivery.Status.DELIVERING,
            claimed_by=worker_id,
            claimed_until=item.lease_until,
        ).update(**fields)
    )


def _attempt_row(item: Sent, verdict: retry.Verdict, *, worker_id: str) -> Attempt:
    result = item.result
    return Attempt(
        delivery_id=item.delivery_id,
        endpoint_id=item.endpoint_id,
        number=item.attempt_count + 1,
        started_at=item.started_at,
        response_ms=result.duration_ms,
        status_code=result.status_code,
        error_kind=storable_text(result.error_kind, limit=40)
        or _status_kind(item, verdict),
        # A receiver shaped these: no NUL, no lone surrogate may reach the database.
        error_message=storable_text(result.error_message, limit=500),
        response_body=storable_text(result.body_excerpt),
        worker_id=worker_id,
        outcome=str(verdict),
        request_url=result.request_url or None,
        request_headers=[list(h) for h in result.request_headers] or None,
        response_headers=[
            [storable_text(name), storable_text(value)]
            for name, value in result.response_headers
        ]
        or None,
    )


def _status_kind(item: Sent, verdict: retry.Verdict) -> str:
    if verdict == retry.Verdict.SUCCEEDED:
        return ""
    if item.result.status_code in item.permanent_statuses:
        return ErrorKind.PERMANENT_STATUS
    return ErrorKind.HTTP_STATUS


_HEALTH_FIELDS = [
    "breaker_state",
    "failure_threshold",
    "consecutive_failures",
    "cooldown_seconds",
    "opened_at",
    "next_probe_at",
    "probe_delivery_id",
    "breaker_reason",
    "last_success_at",
    "last_failure_at",
]


def _apply_breaker(health: EndpointHealth, item: Sent, *, now: datetime) -> None:
    """Move the breaker (pure rules in endpoints.breaker) and copy it back."""
    succeeded = is_success(item.result.status_code)
    state = breaker.Breaker(
        state=health.breaker_state,
        consecutive_failures=health.consecutive_failures,
        cooldown_seconds=health.cooldown_seconds,
        opened_at=health.opened_at,
        next_probe_at=health.next_probe_at,
        reason=health.breaker_reason,
    )
    # The setting as it is now, halved for a very slow endpoint (contract 6);
    # stored so that what the admin shows is what was applied.
    health.failure_threshold = breaker.effective_threshold(
        base_threshold=settings.BREAKER_FAILURE_THRESHOLD,
        p95_ms=health.p95_ms,
        samples=health.sample_count,
    )
    probing = health.breaker_state == EndpointHealth.State.HALF_OPEN
    if succeeded:
        health.last_success_at = now
        # Once open, only the probe closes it: a late success of a send made
        # before it opened does not cut the cooldown short.
        if health.breaker_state == EndpointHealth.State.CLOSED or item.is_probe:
            state = breaker.after_success(
                state, now=now, base_cooldown=settings.BREAKER_COOLDOWN_SECONDS
            )
    else:
        health.last_failure_at = now
        if probing and not item.is_probe:
            # A late result of a send from before the breaker opened: it counts,
            # but only the probe decides what happens to a half-open breaker.
            state = replace(state, consecutive_failures=state.consecutive_failures + 1)
        else:
            state = breaker.after_failure(
                state,
                now=now,
                threshold=health.failure_threshold,  # as set just above
                base_cooldown=settings.BREAKER_COOLDOWN_SECONDS,
                max_cooldown=settings.BREAKER_MAX_COOLDOWN_SECONDS,
                error=_error_text(item.result),
            )
    _trace_breaker(health, state)
    if item.is_probe or state.state != EndpointHealth.State.HALF_OPEN:
        health.probe_delivery_id = ""
    health.breaker_state = state.state
    health.consecutive_failures = state.consecutive_failures
    health.cooldown_seconds = state.cooldown_seconds
    health.opened_at = state.opened_at
    health.next_probe_at = state.next_probe_at
    health.breaker_reason = state.reason[:300]


def _trace_breaker(health: EndpointHealth, state: breaker.Breaker) -> None:
    """A span event on the flush's relay.record span when the breaker moves."""
    was_open = health.breaker_state != EndpointHealth.State.CLOSED
    is_open = state.state != EndpointHealth.State.CLOSED
    if was_open == is_open:
        return
    attributes = {"relay.endpoint_id": health.pk, "relay.breaker_state": state.state}
    if is_open:
        attributes["relay.breaker_reason"] = state.reason[:300]
        attributes["relay.cooldown_seconds"] = state.cooldown_seconds
    span_event("breaker.opened" if is_open else "breaker.closed", attributes)


def _error_text(result: SendResult) -> str:
    if result.error_kind:
        return storable_text(result.error_kind, limit=100)
    if result.status_code is not None and not is_success(result.status_code):
        return f"http {result.status_code}"
    return ""


def _count(tally: Tally, item: Sent, verdict: retry.Verdict) -> None:
    tally[(counters.ATTEMPTS, str(verdict))] += 1
    if verdict == retry.Verdict.SUCCEEDED:
        tally[(counters.DELIVERIES, "succeeded")] += 1
    elif verdict in (retry.Verdict.DEAD, retry.Verdict.GONE):
        tally[(counters.DELIVERIES, "dead")] += 1
    counters.observe_duration(tally, item.result.duration_ms / 1000)
    if item.published_at is None:
        return
    waited = (item.started_at - item.published_at).total_seconds()
    if item.attempt_count == 0:
        counters.PUBLISH_TO_FIRST_ATTEMPT.observe(tally, max(0.0, waited))
    if verdict == retry.Verdict.SUCCEEDED:
        landed = waited + item.result.duration_ms / 1000
        counters.PUBLISH_TO_SUCCESS.observe(tally, max(0.0, landed))


def _log(item: Sent, verdict: retry.Verdict) -> None:
    # Ids, outcome, status and timing only: never payloads, secrets or bodies.
    logger.info(
        "attempt delivery=%s endpoint=%s number=%d outcome=%s status=%s ms=%.1f error=%s",
        item.delivery_id,
        item.endpoint_id,
        item.attempt_count + 1,
        verdict,
        item.result.status_code if item.result.status_code is not None else "-",
        item.result.duration_ms,
        item.result.error_kind or "-",
        extra={
            "delivery_id": item.delivery_id,
            "endpoint_id": item.endpoint_id,
            "event_id": item.event_id,
            "merchant_id": item.merchant_id,
        },
    )
