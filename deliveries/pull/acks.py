"""POST .../messages/ack and .../messages/nack: a consumer's outcome of the
messages it leased, recorded as an HTTP send's outcome is.

An ack is a succeeded attempt; a nack a failed one (`nacked`), retried after
the consumer's `retry_after_seconds` (clamped to RETRY_MAX_DELAY_SECONDS) or
the endpoint's retry policy, or dead when it was the last of its budget.
The attempt lasted from the lease to the answer (latency percentiles,
lease to ack). A lane whose head is acked or dead goes on, in the same
transaction (deliveries/lanes.py).

Fenced, as every outcome is: a row changes only while it is this endpoint's,
delivering under a lease that has not run out. Any other id (unknown,
another endpoint's or merchant's, never leased, already acked, or leased
past its time) is rejected and changes nothing.
"""

from __future__ import annotations

import random
from collections import Counter as Tally
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Value, When

from deliveries import retry
from deliveries.lanes import lanes_advance
from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.ops import counters
from deliveries.pull.leasing import PULLED_BY, counter_shard
from endpoints.models import Endpoint
from endpoints.retry_policy import policy_in_force

MAX_IDS = 100  # ids in one ack or nack, as many as one pull hands out


@dataclass
class Answer:
    done: list[str] = field(default_factory=list)  # acked, or nacked
    rejected: list[str] = field(default_factory=list)


def messages_ack(*, endpoint: Endpoint, ids: list[str], now: datetime) -> Answer:
    return _record(endpoint=endpoint, ids=ids, now=now, nack=None)


def messages_nack(
    *,
    endpoint: Endpoint,
    ids: list[str],
    now: datetime,
    retry_after_seconds: float | None = None,
    rand: random.Random | None = None,
) -> Answer:
    return _record(
        endpoint=endpoint,
        ids=ids,
        now=now,
        nack=(retry_after_seconds, rand or random.Random()),
    )


def _record(
    *,
    endpoint: Endpoint,
    ids: list[str],
    now: datetime,
    nack: tuple[float | None, random.Random] | None,
) -> Answer:
    asked = list(dict.fromkeys(str(i) for i in ids))
    answer = Answer()
    policy = policy_in_force(endpoint)
    with transaction.atomic():
        rows = {
            r["id"]: r
            for r in Delivery.objects.select_for_update(of=("self",))
            .filter(
                merchant_id=endpoint.merchant_id,
                endpoint_id=endpoint.pk,
                pk__in=asked,
                status=Delivery.Status.DELIVERING,
                claimed_by=PULLED_BY,
                claimed_until__gt=now,
            )
            .values(
                "id",
                "attempt_count",
                "budget_start",
                "ordering_key",
                "last_attempt_at",
                "event_id",
                "created_at",
            )
        }
        answer.rejected = [pk for pk in asked if pk not in rows]
        answer.done = [pk for pk in asked if pk in rows]
        if not rows:
            return answer
        tally: Tally = Tally()
        attempts, finished, changes = [], [], {}
        for row in rows.values():
            verdict, changes[row["id"]] = _outcome(
                row, nack=nack, policy=policy, now=now
            )
            attempts.append(_attempt(row, endpoint=endpoint, verdict=verdict, now=now))
            tally[(counters.ATTEMPTS, str(verdict))] += 1
            if verdict != retry.Verdict.RETRY:
                tally[(counters.DELIVERIES, str(verdict))] += 1
                if row["ordering_key"]:
                    finished.append(
                        (endpoint.merchant_id, endpoint.pk, row["ordering_key"])
                    )
        Delivery.objects.filter(
            merchant_id=endpoint.merchant_id, pk__in=list(changes)
        ).update(attempt_count=F("attempt_count") + 1, **_per_row(changes))
        Attempt.objects.bulk_create(attempts)
        lanes_advance(lanes=finished, now=now)
        counters.counters_add(shard=counter_shard("pull"), tally=tally)
    return answer


def _outcome(row: dict, *, nack, policy, now: datetime) -> tuple[retry.Verdict, dict]:
    fields = {
        "last_attempt_at": now,
        "last_status_code": None,
        "last_response_ms": _lasted_ms(row, now=now),
        "claimed_by": "",
        "claimed_until": None,
    }
    if nack is None:
        fields.update(status=Delivery.Status.SUCCEEDED, succeeded_at=now, last_error="")
        return retry.Verdict.SUCCEEDED, fields
    fields["last_error"] = ErrorKind.NACKED
    failed = row["attempt_count"] + 1 - row["budget_start"]
    if failed >= policy.max_attempts:
        fields.update(status=Delivery.Status.DEAD, dead_at=now)
        return retry.Verdict.DEAD, fields
    asked, rand = nack
    if asked is not None:
        delay = min(max(0.0, float(asked)), settings.RETRY_MAX_DELAY_SECONDS)
    else:
        delay = retry.next_delay(
            failed_attempts=failed,
            status_code=None,
            retry_after_header=None,
            base=settings.RETRY_BASE_SECONDS,
            max_delay=settings.RETRY_MAX_DELAY_SECONDS,
            rand=rand,
            now=now,
            schedule=policy.retry_schedule,
        )
    fields.update(
        status=Delivery.Status.PENDING, next_attempt_at=now + timedelta(seconds=delay)
    )
    return retry.Verdict.RETRY, fields


def _per_row(changes: dict[str, dict]) -> dict:
    """One UPDATE's SET for rows that each take their own values: a column
    every row gives the same value is that value, any other a CASE by id
    (an ack of 100 messages is one statement, not 100)."""
    names = dict.fromkeys(name for fields in changes.values() for name in fields)
    columns = {}
    for name in names:
        values = [fields.get(name, _KEEP) for fields in changes.values()]
        if _KEEP not in values and all(v == values[0] for v in values):
            columns[name] = values[0]
            continue
        columns[name] = Case(
            *(
                When(pk=pk, then=Value(fields[name]))
                for pk, fields in changes.items()
                if name in fields
            ),
            default=F(name),
            output_field=Delivery._meta.get_field(name),
        )
    return columns


_KEEP = object()


def _lasted_ms(row: dict, *, now: datetime) -> float:
    """From the lease (last_attempt_at, set by leasing.py) to this answer."""
    leased = row["last_attempt_at"] or now
    return max(0.0, (now - leased).total_seconds() * 1000)


def _attempt(row: dict, *, endpoint: Endpoint, verdict: retry.Verdict, now) -> Attempt:
    return Attempt(
        delivery_id=row["id"],
        endpoint_id=endpoint.pk,
        merchant_id=endpoint.merchant_id,
        number=row["attempt_count"] + 1,
        started_at=row["last_attempt_at"] or now,
        response_ms=_lasted_ms(row, now=now),
        error_kind="" if verdict == retry.Verdict.SUCCEEDED else ErrorKind.NACKED,
        error_message=""
        if verdict == retry.Verdict.SUCCEEDED
        else "the consumer answered nack",
        worker_id=PULLED_BY,
        outcome=str(verdict),
    )
