"""Every locking query of the dispatcher, and nothing else.

A claim is one short transaction: lock due rows with SKIP LOCKED, mark them
delivering under a lease, commit. A delivering row whose lease has run out
(or was cut back because its dispatcher was declared dead, rescue.py) is due
again, and the next claim takes it over, spending the lost attempt as
`lease_expired`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from deliveries.dispatch import backend, claim_sql, load_sql, prepared
from deliveries.dispatch.due import (
    DUE_STATUSES,
    Live,
    endpoints_with_due_work,
    live_claims,
    live_of,
    rooms,
)
from deliveries.dispatch.shares import merchant_shares
from deliveries.lanes import lanes_advance
from deliveries.models import Attempt, Delivery, ErrorKind
from endpoints.selectors import live_secrets_read, live_secrets_statement
from relayproject.lib import citus

logger = logging.getLogger(__name__)

# pg_try_advisory_xact_lock(MERCHANT_LOCK_SPACE, hashtext(merchant id)): the
# two-key form, so it never meets the one-key locks used elsewhere ("relay").
# One lock per merchant covers its endpoints too: each endpoint has one
# merchant, and every claim counts an endpoint only under its merchant's lock.
MERCHANT_LOCK_SPACE = 0x726D
_MERCHANT_LOCKS = (
    "SELECT m.id FROM unnest(%s::bigint[]) WITH ORDINALITY AS m(id, n) "
    "WHERE pg_try_advisory_xact_lock(%s, hashtext(m.id::text)) ORDER BY m.n"
)
CLAIM_FIELDS = (
    "id",
    "status",
    "claimed_by",
    "attempt_count",
    "budget_start",
    "endpoint_id",
    "merchant_id",
    "ordering_key",
    "endpoint__max_attempts",
)


@dataclass
class Claim:
    """What one claim took: the rows to send now, under one lease value."""

    lease_until: datetime
    delivery_ids: list[str] = field(default_factory=list)
    probe_ids: set[str] = field(default_factory=set)
    # Deliveries carrying an endpoint's verification challenge (jobs.py puts
    # the challenge into their body).
    verification_ids: set[str] = field(default_factory=set)
    reclaimed: int = 0
    reclaimed_ids: set[str] = field(default_factory=set)  # of delivery_ids, resent
    # Each taken row's merchant: on Citus, what routes the statements that
    # follow (jobs_load, release) to the merchants' shards.
    merchants: dict[str, int] = field(default_factory=dict)
    dead_on_reclaim: int = 0
    # Endpoints skipped because another claim was counting them: not dry.
    contended: int = 0
    # Leases found expired, logged after commit (never inside the transaction).
    lost: list[dict] = field(default_factory=list)
    # What the rows marked by the locking statement need to be sent, read by
    # that statement (plain PostgreSQL): their job rows (load_sql's columns,
    # as read) and their endpoints' secrets. jobs_load reads the rest.
    job_rows: list[tuple] = field(default_factory=list)
    secrets: dict[str, list[str]] = field(default_factory=dict)


def claim_batch(
    *, worker_id: str, now: datetime, lease_seconds: float, limit: int
) -> Claim:
    """Claim up to `limit` due deliveries of active endpoints with a closed breaker,
    shared fairly among their merchants, then among each merchant's endpoints,
    none past its max_in_flight and no merchant past its own.

    Which endpoints have due work (one read, before any transaction; nothing
    due ends the claim there), then three statements in one short
    transaction: which of their merchants no other claim is counting right
    now (a transaction-level advisory lock each, tried, never waited for),
    how many live claims those merchants and their endpoints have, then each
    endpoint's own oldest due rows, SKIP LOCKED. On PostgreSQL the first two
    go in one round trip, and the third brings back the taken rows' jobs
    with their secrets in another (claim.job_rows, claim.secrets).
    """
    claim = Claim(lease_until=now + timedelta(seconds=lease_seconds))
    if limit <= 0:
        return claim
    with prepared.statements():
        # Before the transaction: a lock-free read whose every finding is
        # checked again under the locks below (and under READ COMMITTED each
        # statement reads its own snapshot anyway), so a claim that finds
        # nothing due, as most do on a quiet relay, is one round trip, not
        # BEGIN, the read and COMMIT.
        due = endpoints_with_due_work(now=now, limit=limit)
        if not due:
            return claim
        return _claim_due(due, claim=claim, worker_id=worker_id, now=now, limit=limit)


def _claim_due(
    due: dict, *, claim: Claim, worker_id: str, now: datetime, limit: int
) -> Claim:
    with transaction.atomic():
        merchants, live = merchants_counted(
            list(dict.fromkeys(d.merchant_id for d in due.values())), now=now
        )
        counting = {e: d for e, d in due.items() if d.merchant_id in merchants}
        claim.contended = len(due) - len(counting)
        shares = merchant_shares(
            limit=limit, merchants=rooms(counting, merchants, live)
        )
        rows = _due_rows_locked(
            shares,
            merchants={e: due[e].merchant_id for e in shares},
            max_attempts={e: due[e].max_attempts for e in shares},
            claim=claim,
            now=now,
            worker_id=worker_id,
        )
        rows_take(rows, claim=claim, worker_id=worker_id, now=now)
    log_claim(claim)
    return claim


def merchants_counted(
    merchant_ids: list[int], *, now: datetime
) -> tuple[list[int], Live]:
    """The merchants this claim may count and take from, and their live claims.

    On PostgreSQL the merchants are those whose advisory lock it gets, so two
    claims never count one merchant's live claims (nor any of its endpoints')
    at once: the merchant's and its endpoints' max_in_flight hold across
    dispatchers. The lock is held to commit; a merchant another claim holds is
    skipped, not waited for.

    The count runs after the locks' answer, with a snapshot of its own (READ
    COMMITTED), so it sees all that the merchant's last holder committed
    before letting go. Neither is sent in a pipeline (together.py): a
    dispatcher frozen between a pipeline's statements would hold the locks
    for as long as it stays frozen, since PostgreSQL's idle-in-transaction
    timeout only starts at the pipeline's end."""
    if not backend.shared_by_dispatchers() or not merchant_ids:
        # SQLite: one dispatcher, one writer at a time
        return merchant_ids, live_claims(merchant_ids, now=now)
    with connection.cursor() as cursor:
        cursor.execute(_MERCHANT_LOCKS, [merchant_ids, MERCHANT_LOCK_SPACE])
        merchants = [row[0] for row in cursor.fetchall()]
        if not merchants:
            return merchants, live_of([])
        cursor.execute(load_sql.LIVE, {"now": now, "merchants": merchants})
        return merchants, live_of(cursor.fetchall())


def _due_rows_locked(
    shares: dict[str, int],
    *,
    merchants: dict[str, int],
    max_attempts: dict[str, int | None],
    claim: Claim,
    now: datetime,
    worker_id: str,
) -> list[dict]:
    """Each endpoint's oldest due rows, up to its share, locked SKIP LOCKED.

    On PostgreSQL the same statement marks the pending ones delivering under
    the lease (row["taken"]), a round trip less; expired leases are left to
    rows_take, which spends their lost attempt first. On plain PostgreSQL it
    also reads the marked rows' jobs, and their endpoints' secrets are read
    in the same round trip (claim.job_rows, claim.secrets)."""
    if not shares:
        return []
    if backend.shared_by_dispatchers():
        return _locked_rows(
            shares,
            merchants=merchants,
            max_attempts=max_attempts,
            claim=claim,
            arguments={"now": now, "worker": worker_id, "lease": claim.lease_until},
        )
    rows = [
        row
        for endpoint_id, share in shares.items()
        for row in Delivery.objects.select_for_update(skip_locked=True)
        .filter(
            endpoint_id=endpoint_id,
            status__in=DUE_STATUSES,
            next_attempt_at__lte=now,
        )
        .order_by("next_attempt_at")
        .values(*CLAIM_FIELDS[:-1])[:share]
    ]
    for row in rows:
        row["endpoint__max_attempts"] = max_attempts[row["endpoint_id"]]
    return rows


def _locked_rows(
    shares: dict[str, int],
    *,
    merchants: dict[str, int],
    max_attempts: dict[str, int | None],
    claim: Claim,
    arguments: dict,
) -> list[dict]:
    """_due_rows_locked on PostgreSQL: one statement for all merchants, then
    the secrets read; on Citus one per merchant, each routed to its shard
    (claim_sql.lock, pinned), and the jobs loaded after the claim. Not in a
    pipeline: the transaction holds the merchants' locks (merchants_counted)."""
    pinned = citus.on()
    groups: dict[int | None, dict[str, int]] = {}
    for endpoint_id, share in shares.items():
        key = merchants[endpoint_id] if pinned else None
        groups.setdefault(key, {})[endpoint_id] = share
    statement = claim_sql.lock(max(shares.values()), pinned=pinned)
    rows = []
    with connection.cursor() as cursor:
        for merchant_id, group in groups.items():
            cursor.execute(
                statement,
                {
                    "endpoints": list(group),
                    "shares": list(group.values()),
                    "merchant": merchant_id,
                    **arguments,
                },
            )
            names = [c.name for c in cursor.description]
            claimed = names.index("taken") + 1  # the claim's columns; then a job's
            for found in cursor.fetchall():
                row = dict(zip(names[:claimed], found[:claimed], strict=True))
                row["endpoint__max_attempts"] = max_attempts[row["endpoint_id"]]
                rows.append(row)
                if row["taken"] and len(found) > claimed:
                    claim.job_rows.append(found[claimed:])
        if not pinned:
            cursor.execute(
                *live_secrets_statement(endpoint_ids=list(shares), now=arguments["now"])
            )
            claim.secrets = live_secrets_read(cursor.fetchall())
    return rows


def rows_take(
    rows: list[dict], *, claim: Claim, worker_id: str, now: datetime
) -> list[str]:
    """Mark locked rows delivering; expired leases spend their lost attempt first."""
    fresh = [r["id"] for r in rows if r["status"] == Delivery.Status.PENDING]
    expired = [r for r in rows if r["status"] == Delivery.Status.DELIVERING]
    lost_attempts = []
    exhausted: list[str] = []
    resend: list[str] = []
    for row in expired:
        max_attempts = row["endpoint__max_attempts"] or settings.MAX_ATTEMPTS
        used = row["attempt_count"] + 1 - row["budget_start"]
        out_of_attempts = used >= max_attempts
        claim.lost.append(
            {
                "id": row["id"],
                "endpoint_id": row["endpoint_id"],
                "claimed_by": row["claimed_by"],
                "number": row["attempt_count"] + 1,
                "dead": out_of_attempts,
            }
        )
        (exhausted if out_of_attempts else resend).append(row["id"])
        lost_attempts.append(
            Attempt(
                delivery_id=row["id"],
                endpoint_id=row["endpoint_id"],
                merchant_id=row["merchant_id"],
                number=row["attempt_count"] + 1,
                started_at=now,
                error_kind=ErrorKind.LEASE_EXPIRED,
                error_message="the worker died or lost its lease before recording",
                worker_id=row["claimed_by"],
                outcome=Attempt.Outcome.DEAD
                if out_of_attempts
                else Attempt.Outcome.RETRY,
            )
        )
    if lost_attempts:
        Attempt.objects.bulk_create(lost_attempts)
        Delivery.objects.filter(pk__any=[r["id"] for r in expired]).update(
            attempt_count=F("attempt_count") + 1,
            last_error=ErrorKind.LEASE_EXPIRED,
            last_status_code=None,
            last_attempt_at=now,
        )
    if exhausted:
        Delivery.objects.filter(pk__any=exhausted).update(
            status=Delivery.Status.DEAD,
            dead_at=now,
            claimed_by="",
            claimed_until=None,
        )
        # A head dead on reclaim is a dead letter like any other: its lane
        # goes on, in this transaction (deliveries/lanes.py).
        lanes_advance(
            lanes=[
                (r["merchant_id"], r["endpoint_id"], r["ordering_key"])
                for r in expired
                if r["id"] in exhausted
            ],
            now=now,
        )
    taken = fresh + resend
    marked = {r["id"] for r in rows if r.get("taken")}  # by _due_rows_locked
    if unmarked := [pk for pk in taken if pk not in marked]:
        Delivery.objects.filter(pk__any=unmarked).update(
            status=Delivery.Status.DELIVERING,
            claimed_by=worker_id,
            claimed_until=claim.lease_until,
            next_attempt_at=claim.lease_until,
        )
    claim.delivery_ids.extend(taken)
    merchant_of = {r["id"]: r["merchant_id"] for r in rows}
    claim.merchants.update((pk, merchant_of[pk]) for pk in taken)
    claim.reclaimed_ids.update(resend)
    claim.reclaimed += len(expired)
    claim.dead_on_reclaim += len(exhausted)
    return taken


def log_claim(claim: Claim) -> None:
    """Log the leases a committed claim found expired; never inside its transaction."""
    for lost in claim.lost:
        ids = {"delivery_id": lost["id"], "endpoint_id": lost["endpoint_id"]}
        logger.warning(
            "reclaimed delivery=%s endpoint=%s lost_by=%s",
            lost["id"],
            lost["endpoint_id"],
            lost["claimed_by"],
            extra=ids,
        )
        # The same line every other attempt gets, so one grep shows them all.
        logger.info(
            "attempt delivery=%s endpoint=%s number=%d outcome=%s status=- ms=- error=%s",
            lost["id"],
            lost["endpoint_id"],
            lost["number"],
            "dead" if lost["dead"] else "retry",
            ErrorKind.LEASE_EXPIRED,
            extra=ids,
        )
    claim.lost = []


def release(
    *,
    worker_id: str,
    lease_until: datetime,
    delivery_ids: list[str],
    due_at: datetime,
    merchants: Mapping[str, int | None] | None = None,
) -> int:
    """Give claimed-but-unsent rows back, due at `due_at`, without spending attempts.

    `merchants` (delivery id -> merchant) lets Citus run one statement per
    merchant on its shard; a row without one is given back by a statement
    over every shard. Plain PostgreSQL and SQLite need no merchant."""
    if not delivery_ids:
        return 0
    groups: dict[int | None, list[str]] = {}
    pinned = citus.on()
    for pk in delivery_ids:
        key = (merchants or {}).get(pk) if pinned else None
        groups.setdefault(key, []).append(pk)
    released = 0
    with prepared.statements():
        for merchant_id, ids in groups.items():
            rows = Delivery.objects.filter(
                pk__any=ids,
                status=Delivery.Status.DELIVERING,
                claimed_by=worker_id,
                claimed_until=lease_until,
            )
            if merchant_id is not None:
                rows = rows.filter(merchant_id=merchant_id)  # one shard on Citus
            released += rows.update(**Delivery.back_to_pending(due_at=due_at))
    return released
