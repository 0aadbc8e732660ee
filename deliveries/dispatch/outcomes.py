"""Record what a send did: the attempt, the delivery, the endpoint's health.

One short transaction per flush, never spanning a send. Fencing: a delivery
row changes only while this worker still holds the lease it was claimed
with, so a worker whose lease was taken over cannot overwrite the new owner
(the UPDATE is delivery_update.py's).
"""

from __future__ import annotations

import logging
import random
from collections import Counter as Tally
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import connection, transaction

from deliveries import retry
from deliveries.dispatch import backend
from deliveries.dispatch.attempt_insert import attempts_insert
from deliveries.dispatch.delivery_update import (
    deliveries_update,
    error_text,
    spends_no_attempt,
)
from deliveries.dispatch.together import sent_together
from deliveries.dispatch.transport import SendResult
from deliveries.lanes import Lane, lanes_advance
from deliveries.models import ErrorKind
from deliveries.ops import counters
from deliveries.publish.sanitize import storable_text
from deliveries.retry import is_delivered, is_success
from deliveries.words import ANSWER_NOT_KEPT
from endpoints import health
from endpoints.services import endpoints_disable
from endpoints.verification import echoed, endpoints_verified_by_echo

logger = logging.getLogger(__name__)
GONE_BY = "receiver"  # who disabled an endpoint that answered 410
# An error message of a verification's attempt holding this many characters of
# its challenge in a row (any case) is not kept: a guess needs no more.
CHALLENGE_QUOTE_CHARS = 8
QUOTED_CHALLENGE = "[not kept: it quoted part of the verification challenge]"


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
    challenge: str = field(default="", repr=False)  # a verification's (jobs.py)
    ordering_key: str = ""  # its ordered lane, "" if none (deliveries/lanes.py)
    # Its endpoint's delays between attempts; None: the full-jitter backoff.
    retry_schedule: tuple[float, ...] | None = None


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
    sent = [_echo_checked(item) for item in sent]
    verdicts = {item.delivery_id: _verdict(item) for item in sent}
    with transaction.atomic():
        healths = health.health_rows_locked(
            health.rows_to_lock(
                _health_outcome(item) for item in sent if _says_health(item)
            )
        )
        attempts: list[dict] = []
        gone: set[str] = set()
        updated = deliveries_update(
            [(item, verdicts[item.delivery_id]) for item in sent],
            worker_id=worker_id,
            now=now,
            rand=rand,
        )
        # In this transaction, after the fenced UPDATE: a lane goes on exactly
        # when its head's last outcome commits, and only the lease holder's.
        lanes_advance(lanes=_lanes_done(sent, verdicts, updated), now=now)
        healthy_successes: dict[str, int | None] = {}  # endpoint -> merchant
        verified: list[tuple[str, int | None, str]] = []
        counted: list[tuple[Sent, retry.Verdict]] = []
        for item in sent:
            verdict = verdicts[item.delivery_id]
            if item.delivery_id not in updated:
                recorded.fenced.append(item.delivery_id)
                continue
            attempts.append(_attempt_row(item, verdict, worker_id=worker_id))
            row = healths.get(item.endpoint_id)
            if row is not None and _says_health(item):
                health.outcome_apply(row, _health_outcome(item), now=now)
            elif row is None and _says_health(item):
                healthy_successes[item.endpoint_id] = item.merchant_id
            if verdict == retry.Verdict.GONE:
                gone.add(item.endpoint_id)
            if item.challenge and verdict == retry.Verdict.SUCCEEDED:
                verified.append((item.endpoint_id, item.merchant_id, item.delivery_id))
            counted.append((item, verdict))
        _count(recorded.tally, counted)
        recorded.opened, recorded.closed = health.health_rows_save(
            healths.values(), now=now
        )
        health.successes_mark(healthy_successes, now=now)
        endpoints_verified_by_echo(verified, now=now)
        endpoints_disable(
            endpoint_ids=gone,
            reason="the receiver answered 410 Gone",
            by=GONE_BY,
            now=now,
        )
        # Writes whose answers nothing here reads: one round trip for all
        # (together.py), where each was one.
        with sent_together():
            attempts_insert(attempts)
            counters.counters_add(shard=worker_id, tally=recorded.tally)
            if losable(sent, locked_health=bool(healths)):
                commit_lazily()
    for item in sent:
        if item.delivery_id in recorded.fenced:
            logger.warning(
                "fenced delivery=%s: lease taken over, outcome dropped",
                item.delivery_id,
            )
        else:
            _log(item, verdicts[item.delivery_id])
    return recorded


def losable(sent: list[Sent], *, locked_health: bool) -> bool:
    """Whether a server crash may lose this flush's record at the cost of one
    resend and nothing else (docs/pages/concepts/guarantees.md: a lost record leaves each
    row delivering under its lease, and the row is re-claimed and sent again
    once the lease runs out, as if this dispatcher had died before recording).

    Only a flush of plain successes on endpoints whose breaker is at rest:
    one that locked a health row (a failure, a probe, a breaker not at rest,
    a 410 that disables its endpoint) moves what the next sends do, so losing
    it would cost more than a resend; and an outcome on its last attempt
    would be re-claimed as out of attempts and dead-lettered, not resent.
    Nor a verification's answer (echoed or not): it decides whether the
    endpoint's held deliveries go out.
    """
    return not locked_health and not any(
        item.challenge
        or item.attempt_count + 1 - item.budget_start >= item.max_attempts
        # Locks no health row, but a failure: lost, its row's lease would run
        # out and spend an attempt the proxy's failure was not to spend.
        or spends_no_attempt(item.result)
        for item in sent
    )


def commit_lazily() -> None:
    """This transaction's commit returns before its WAL is on disk (one
    fsync fewer per flush); SET LOCAL ends with the transaction, so nothing
    else on the session, and no publish anywhere, commits this way."""
    if backend.commits_lazily():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")


def _echo_checked(item: Sent) -> Sent:
    """A verification's 2xx proves only that something answers: it counts
    when the body (bounded by the transport) echoes the challenge; otherwise
    it is a failed attempt, retried, with its own error kind.

    Nothing of the answer is kept but its status and timing: a receiver that
    reflects what it got (an echo service, an error page) would otherwise hand
    the challenge, or enough of it to guess the rest once the body is cut at
    RESPONSE_BODY_LIMIT_BYTES, to whoever reads the attempt, and pasting it
    would verify an endpoint nobody there agreed to."""
    if not item.challenge:
        return item
    result = item.result
    if is_success(result.status_code) and not echoed(
        result.body_excerpt, item.challenge
    ):
        result = replace(result, error_kind=ErrorKind.CHALLENGE_NOT_ECHOED)
    return replace(
        item,
        result=replace(
            result,
            body_excerpt=ANSWER_NOT_KEPT,
            response_headers=(),
            # The relay's own words (no receiver bytes); checked all the same.
            error_message=QUOTED_CHALLENGE
            if quotes_challenge(result.error_message, item.challenge)
            else result.error_message,
        ),
    )


def quotes_challenge(text: str, challenge: str) -> bool:
    """Whether text holds CHALLENGE_QUOTE_CHARS of challenge in a row, in any case."""
    text, challenge = text.lower(), challenge.lower()
    width = CHALLENGE_QUOTE_CHARS
    return any(
        challenge[i : i + width] in text for i in range(len(challenge) - width + 1)
    )


def _lanes_done(
    sent: list[Sent], verdicts: dict[str, retry.Verdict], updated: set[str]
) -> list[Lane]:
    """The lanes whose head this flush finished (succeeded or dead)."""
    return [
        (item.merchant_id, item.endpoint_id, item.ordering_key)
        for item in sent
        if item.ordering_key
        and item.delivery_id in updated
        and verdicts[item.delivery_id] != retry.Verdict.RETRY
    ]


def _says_health(item: Sent) -> bool:
    """Whether the outcome says anything of its endpoint's health: a send the
    egress proxy failed never reached the receiver, so it moves no breaker
    (a probe's breaker stays half-open until its lease, then probes again)."""
    return not spends_no_attempt(item.result)


def _health_outcome(item: Sent) -> health.Outcome:
    return health.Outcome(
        endpoint_id=item.endpoint_id,
        succeeded=is_delivered(
            item.result.status_code, acknowledged=item.result.acknowledged
        ),
        is_probe=item.is_probe,
        error=error_text(item.result),
        merchant_id=item.merchant_id,
    )


def _verdict(item: Sent) -> retry.Verdict:
    verdict = retry.classify(
        status_code=item.result.status_code,
        error_kind=item.result.error_kind,
        permanent=item.permanent_statuses,
        acknowledged=item.result.acknowledged,
    )
    if (
        verdict == retry.Verdict.SUCCEEDED
        and item.result.error_kind == ErrorKind.CHALLENGE_NOT_ECHOED
    ):
        verdict = retry.Verdict.RETRY
    used = item.attempt_count + 1 - item.budget_start
    if (
        verdict == retry.Verdict.RETRY
        and used >= item.max_attempts
        and not spends_no_attempt(item.result)
    ):
        return retry.Verdict.DEAD
    return verdict


def _attempt_row(item: Sent, verdict: retry.Verdict, *, worker_id: str) -> dict:
    """The Attempt's fields by attname (attempt_insert.py writes them)."""
    result = item.result
    return {
        "delivery_id": item.delivery_id,
        "endpoint_id": item.endpoint_id,
        "merchant_id": item.merchant_id,
        "number": item.attempt_count + 1,
        "started_at": item.started_at,
        # A float whatever the sender gave: one array of one type (attempt_insert).
        "response_ms": float(result.duration_ms),
        "status_code": result.status_code,
        "error_kind": storable_text(result.error_kind, limit=40)
        or _status_kind(item, verdict),
        # A receiver shaped these: no NUL, no lone surrogate may reach the database.
        "error_message": storable_text(result.error_message, limit=500),
        "response_body": storable_text(result.body_excerpt),
        "worker_id": worker_id,
        "outcome": str(verdict),
        "request_url": result.request_url or None,
        # Pairs as tuples: JSON writes them as the same arrays as lists.
        "request_headers": list(result.request_headers) or None,
        "response_headers": [
            (storable_text(name), storable_text(value))
            for name, value in result.response_headers
        ]
        or None,
    }


def _status_kind(item: Sent, verdict: retry.Verdict) -> str:
    if verdict == retry.Verdict.SUCCEEDED:
        return ""
    if item.result.status_code in item.permanent_statuses:
        return ErrorKind.PERMANENT_STATUS
    return ErrorKind.HTTP_STATUS


def _count(tally: Tally, counted: list[tuple[Sent, retry.Verdict]]) -> None:
    """A flush's recorded attempts into the counters and histograms."""
    durations, first_waits, landings = [], [], []
    for item, verdict in counted:
        tally[(counters.ATTEMPTS, str(verdict))] += 1
        if verdict == retry.Verdict.SUCCEEDED:
            tally[(counters.DELIVERIES, "succeeded")] += 1
        elif verdict in (retry.Verdict.DEAD, retry.Verdict.GONE):
            tally[(counters.DELIVERIES, "dead")] += 1
        durations.append(item.result.duration_ms / 1000)
        if item.published_at is None:
            continue
        waited = (item.started_at - item.published_at).total_seconds()
        if item.attempt_count == 0:
            first_waits.append(max(0.0, waited))
        if verdict == retry.Verdict.SUCCEEDED:
            landings.append(max(0.0, waited + item.result.duration_ms / 1000))
    counters.ATTEMPT_DURATION.observe_many(tally, durations)
    counters.PUBLISH_TO_FIRST_ATTEMPT.observe_many(tally, first_waits)
    counters.PUBLISH_TO_SUCCESS.observe_many(tally, landings)


def _log(item: Sent, verdict: retry.Verdict) -> None:
    # Ids, outcome, status and timing only: never payloads, secrets or bodies.
    # A success is a DEBUG line: its attempt row already says everything, and
    # at thousands a second the line cost a tenth of the dispatcher's CPU
    # (bench/RESULTS.md, issue 21, fifth pass); anything else is INFO.
    level = logging.DEBUG if verdict == retry.Verdict.SUCCEEDED else logging.INFO
    if not logger.isEnabledFor(level):
        return
    logger.log(
        level,
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
