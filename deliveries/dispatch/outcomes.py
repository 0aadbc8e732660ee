"""Record what a send did: the attempt, the delivery, the endpoint's health.

One short transaction per flush, never spanning a send. Fencing: a delivery
row changes only while this worker still holds the lease it was claimed
with, so a worker whose lease was taken over cannot overwrite the new owner.
"""

from __future__ import annotations

import logging
import random
from collections import Counter as Tally
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from deliveries import retry
from deliveries.dispatch import prepared
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.ops import counters
from deliveries.publish.sanitize import storable_text
from deliveries.retry import is_success
from endpoints import health
from endpoints.services import endpoints_disable

logger = logging.getLogger(__name__)
GONE_BY = "receiver"  # who disabled an endpoint that answered 410


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


def outcomes_record(
    *, sent: list[Sent], worker_id: str, now: datetime, rand: random.Random
) -> Recorded:
    """Record a flush in one transaction that runs SQL only; log after commit."""
    recorded = Recorded()
    if not sent:
        return recorded
    verdicts = {item.delivery_id: _verdict(item) for item in sent}
    with transaction.atomic():
        healths = health.health_rows_locked(
            health.rows_to_lock(_health_outcome(item) for item in sent)
        )
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
            row = healths.get(item.endpoint_id)
            if row is not None:
                health.outcome_apply(row, _health_outcome(item), now=now)
            else:
                healthy_successes.add(item.endpoint_id)
            if verdict == retry.Verdict.GONE:
                gone.add(item.endpoint_id)
            _count(recorded.tally, item, verdict)
        Attempt.objects.bulk_create(attempts)
        recorded.opened, recorded.closed = health.health_rows_save(
            healths.values(), now=now
        )
        health.successes_mark(healthy_successes, now=now)
        endpoints_disable(
            endpoint_ids=gone,
            reason="the receiver answered 410 Gone",
            by=GONE_BY,
            now=now,
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


def _health_outcome(item: Sent) -> health.Outcome:
    return health.Outcome(
        endpoint_id=item.endpoint_id,
        succeeded=is_success(item.result.status_code),
        is_probe=item.is_probe,
        error=_error_text(item.result),
    )


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
        merchant_id=item.merchant_id,
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
