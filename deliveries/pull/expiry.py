"""What no consumer's request does for pull endpoints, done by the dispatchers
about once a second (deliveries/dispatch/maintenance.py, PullUpkeep):

- pull_leases_expire: a lease that ran out without an ack or nack is a spent
  attempt (`lease_expired`), as a dispatcher's lost lease is: the message is
  due again at once, or dead when that was its last attempt (its ordered
  lane goes on). A consumer's next pull does the same to the expired rows it
  meets (leasing.py). Both lock SKIP LOCKED and their locking statement
  re-checks the row (delivering, pulled, lease over), so a lease is spent
  once, and a row an ack recorded first is left alone: the ack's fence is the
  lease (acks.py), this one's is its end.
- sessions_expire: a listen session nobody pulled for LISTEN_IDLE_SECONDS
  (its `listen` was killed) ends.
- backlogs_trim: a live session holds at most LISTEN_MAX_BACKLOG unfinished
  messages; the oldest beyond it that no consumer holds go dead
  (`listen_backlog_full`), under their lanes' locks (deliveries/lanes.py).
- ended_sessions_delete: an ended session goes, with its deliveries,
  LISTEN_KEEP_ENDED_SECONDS after it ended (or sooner: sessions.py).

Time is a parameter. Each step runs its own short transactions, bounded per
run, and returns what it did; pull_upkeep_log says it after commit. On Citus
every statement that locks rows names one merchant: a lock-free read of every
shard finds the merchants first, as deliveries/dispatch/rescue.py does.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F

from deliveries.lanes import lanes_advance, lanes_lock
from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.ops import counters
from deliveries.pull.leasing import PULLED_BY, lost_attempt
from deliveries.pull.sessions import session_end
from endpoints.models import Endpoint, EndpointHealth
from endpoints.retry_policy import policy_in_force
from endpoints.services import endpoint_delete
from relayproject.lib import citus

logger = logging.getLogger(__name__)

LEASES_PER_RUN = 500  # expired leases spent in one run; the rest the next second
SESSIONS_PER_RUN = 20  # idle sessions ended, and full backlogs trimmed, per run
DELETES_PER_RUN = 3  # ended sessions deleted per run: each may have many rows
# Rows one trim transaction ends at most: it holds the lock of each of their
# lanes (deliveries/lanes.py) to its end, and PostgreSQL's lock table is
# finite; a bigger excess takes a few transactions.
TRIM_BATCH = 500
# The counters' shard of this upkeep (deliveries.ops.counters): one dispatcher
# runs it at a time, so no other writer waits on its rows.
COUNTER_SHARD = "pull-expiry"
# Rows a backlog trim may end: not those leased to a consumer right now (its
# ack would be refused), nor an expired lease (that is a spent attempt first).
TRIMMABLE = (Delivery.Status.PENDING, Delivery.Status.WAITING)
BACKLOG = (*Delivery.Status.UNFINISHED, Delivery.Status.WAITING)


@dataclass(frozen=True)
class Lost:
    """One expired lease, spent."""

    delivery_id: str
    endpoint_id: str
    number: int  # the attempt it spent
    dead: bool


@dataclass
class Upkeep:
    """What one run did, for the log (said after commit)."""

    lost: list[Lost] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)  # sessions
    trimmed: dict[str, int] = field(default_factory=dict)  # session -> dead
    deleted: list[str] = field(default_factory=list)  # sessions


def pull_upkeep(*, now: datetime) -> Upkeep:
    """Every step once."""
    return Upkeep(
        lost=pull_leases_expire(now=now),
        ended=sessions_expire(now=now),
        trimmed=backlogs_trim(now=now),
        deleted=ended_sessions_delete(now=now),
    )


def pull_leases_expire(*, now: datetime, limit: int = LEASES_PER_RUN) -> list[Lost]:
    """Spend the attempt of each pulled message whose lease ended by `now`."""
    expired = Delivery.objects.filter(
        status=Delivery.Status.DELIVERING,
        claimed_by=PULLED_BY,
        claimed_until__lte=now,
    )
    # A lock-free look first: a run that finds nothing (most do) is one
    # statement, no transaction; on Citus it also says which merchants'
    # shards to lock on.
    if citus.on():
        merchants = list(
            expired.order_by().values_list("merchant_id", flat=True).distinct()
        )
    else:
        merchants = [None] if expired.exists() else []
    if not merchants:
        return []
    with transaction.atomic():
        rows: list[dict] = []
        for merchant_id in merchants:
            mine = (
                expired
                if merchant_id is None
                else expired.filter(merchant_id=merchant_id)
            )
            rows += list(
                mine.select_for_update(skip_locked=True, of=("self",))
                .order_by("claimed_until")
                .values(
                    "id",
                    "claimed_by",
                    "attempt_count",
                    "budget_start",
                    "endpoint_id",
                    "merchant_id",
                    "ordering_key",
                )[: limit - len(rows)]
            )
            if len(rows) >= limit:
                break
        return _spend(rows, now=now)


def _spend(rows: list[dict], *, now: datetime) -> list[Lost]:
    """The lost attempts of locked rows: attempt rows, then each row due now
    or dead, counted as the claim counts its reclaims."""
    if not rows:
        return []
    endpoints = {
        e.pk: e
        for e in Endpoint.objects.select_related("merchant").filter(
            pk__in={r["endpoint_id"] for r in rows}
        )
    }
    most = {pk: policy_in_force(e).max_attempts for pk, e in endpoints.items()}
    attempts, lost = [], []
    for row in rows:
        row["attempt_count"] += 1  # lost_attempt's number: the one spent
        dead = row["attempt_count"] - row["budget_start"] >= most[row["endpoint_id"]]
        attempts.append(
            lost_attempt(
                row, endpoint=endpoints[row["endpoint_id"]], now=now, dead=dead
            )
        )
        lost.append(Lost(row["id"], row["endpoint_id"], row["attempt_count"], dead))
    Attempt.objects.bulk_create(attempts)
    dead_ids = {x.delivery_id for x in lost if x.dead}
    for merchant_id, mine in _per_merchant(rows).items():
        ids = [r["id"] for r in mine]
        spent = _of(merchant_id, ids)
        spent.update(
            attempt_count=F("attempt_count") + 1,
            last_error=ErrorKind.LEASE_EXPIRED,
            last_status_code=None,
            last_attempt_at=now,
        )
        if resend := [pk for pk in ids if pk not in dead_ids]:
            _of(merchant_id, resend).update(**Delivery.back_to_pending(due_at=now))
        if dead := [pk for pk in ids if pk in dead_ids]:
            _of(merchant_id, dead).update(
                status=Delivery.Status.DEAD,
                dead_at=now,
                claimed_by="",
                claimed_until=None,
            )
    # A head dead on expiry is a dead letter like any other: its lane goes on.
    lanes_advance(
        lanes=[
            (r["merchant_id"], r["endpoint_id"], r["ordering_key"])
            for r, x in zip(rows, lost, strict=True)
            if x.dead
        ],
        now=now,
    )
    dead_count = sum(x.dead for x in lost)
    counters.counters_add(
        shard=COUNTER_SHARD,
        tally=Tally(
            {
                (counters.RECLAIMED, ""): len(lost),
                (counters.ATTEMPTS, "retry"): len(lost) - dead_count,
                (counters.ATTEMPTS, "dead"): dead_count,
                (counters.DELIVERIES, "dead"): dead_count,
            }
        ),
    )
    return lost


def _per_merchant(rows: list[dict]) -> dict[int | None, list[dict]]:
    """Rows by merchant on Citus (a statement per shard), all in one elsewhere."""
    groups: dict[int | None, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["merchant_id"] if citus.on() else None, []).append(row)
    return groups


def _of(merchant_id: int | None, ids: list[str]):
    rows = Delivery.objects.filter(pk__in=ids)
    return rows if merchant_id is None else rows.filter(merchant_id=merchant_id)


def sessions_expire(*, now: datetime, limit: int = SESSIONS_PER_RUN) -> list[str]:
    """End the live listen sessions whose time ran out before `now`."""
    idle = list(
        Endpoint.objects.filter(
            listen_session=True,
            is_active=True,
            health__session_expires_at__lt=now,
        ).order_by("health__session_expires_at", "pk")[:limit]
    )
    ended = []
    for endpoint in idle:
        with transaction.atomic():
            # The row a pull moves on (sessions.pull_touch), locked and read
            # again: a pull that committed since the look above keeps its
            # session, and one being written now is passed by this run.
            still_idle = list(
                EndpointHealth.objects.select_for_update(skip_locked=True)
                .filter(
                    merchant_id=endpoint.merchant_id,
                    endpoint_id=endpoint.pk,
                    session_expires_at__lt=now,
                )
                .values_list("pk", flat=True)
            )
            if still_idle:
                session_end(endpoint=endpoint, why="idle", now=now)
                ended.append(endpoint.pk)
    return ended


def backlogs_trim(
    *, now: datetime, bound: int | None = None, limit: int = SESSIONS_PER_RUN
) -> dict[str, int]:
    """Live sessions holding more than `bound` (LISTEN_MAX_BACKLOG) unfinished
    messages: the oldest pending or waiting beyond it go dead, no attempt
    spent. Returns session -> how many went dead."""
    bound = settings.LISTEN_MAX_BACKLOG if bound is None else bound
    live = dict(
        Endpoint.objects.filter(listen_session=True, is_active=True).values_list(
            "pk", "merchant_id"
        )
    )
    if not live:
        return {}
    full = (
        Delivery.objects.filter(endpoint_id__in=list(live), status__in=BACKLOG)
        .order_by()
        .values("endpoint_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=bound)
        .values_list("endpoint_id", "n")
    )
    trimmed = {}
    for endpoint_id, held in list(full)[:limit]:
        excess, dead = held - bound, 0
        while excess > dead:
            batch = _trim(
                merchant_id=live[endpoint_id],
                endpoint_id=endpoint_id,
                excess=min(excess - dead, TRIM_BATCH),
                now=now,
            )
            if not batch:
                break
            dead += batch
        if dead:
            trimmed[endpoint_id] = dead
    return trimmed


def _trim(*, merchant_id: int, endpoint_id: str, excess: int, now: datetime) -> int:
    """The oldest `excess` trimmable rows of one session dead, in one
    transaction; how many went (fewer when some are held, or changed since
    they were counted: the next run counts again)."""
    trimmable = Delivery.objects.filter(
        merchant_id=merchant_id, endpoint_id=endpoint_id, status__in=TRIMMABLE
    ).order_by("created_at", "pk")
    with transaction.atomic():
        # Every write to a lane takes the lane's lock before it reads the lane
        # (deliveries/lanes.py), this one too: else an ack of a lane's head,
        # deciding which waiting row comes next while this marks it dead,
        # promotes nothing and the lane stalls. The lanes of the rows to trim,
        # read without locking, are locked first (sorted, as lanes_advance
        # does), then the rows; only rows of those lanes are trimmed.
        keys = set(trimmable.values_list("ordering_key", flat=True)[:excess])
        if not keys:
            return 0
        lanes = [(merchant_id, endpoint_id, key) for key in keys if key]
        lanes_lock(lanes)
        # Rows another transaction holds (a pull leasing them) are passed by:
        # they are that pull's.
        oldest = list(
            trimmable.select_for_update(skip_locked=True, of=("self",))
            .filter(ordering_key__in=keys)
            .values_list("pk", "ordering_key")[:excess]
        )
        if not oldest:
            return 0
        Delivery.objects.filter(
            merchant_id=merchant_id, pk__in=[pk for pk, _ in oldest]
        ).update(
            status=Delivery.Status.DEAD,
            dead_at=now,
            claimed_by="",
            claimed_until=None,
            last_error=ErrorKind.LISTEN_BACKLOG_FULL,
        )
        # A lane whose head went: its oldest waiting row left (if any) is
        # next. A lane that keeps its head is left alone by lanes_advance.
        lanes_advance(
            lanes=[(merchant_id, endpoint_id, key) for _, key in oldest], now=now
        )
        counters.counters_add(
            shard=COUNTER_SHARD,
            tally=Tally({(counters.DELIVERIES, "dead"): len(oldest)}),
        )
    return len(oldest)


def ended_sessions_delete(*, now: datetime, limit: int = DELETES_PER_RUN) -> list[str]:
    """Delete, with their deliveries, sessions that ended before
    LISTEN_KEEP_ENDED_SECONDS ago."""
    cutoff = now - timedelta(seconds=settings.LISTEN_KEEP_ENDED_SECONDS)
    ended = list(
        Endpoint.objects.filter(
            listen_session=True, is_active=False, disabled_at__lt=cutoff
        ).order_by("disabled_at", "pk")[:limit]
    )
    deleted = []
    for endpoint in ended:
        with transaction.atomic():
            # Locked and read again, SKIP LOCKED: a session a start is
            # deleting right now (sessions.ended_sessions_prune) is passed by,
            # so two deleters never wait on, nor deadlock over, its rows.
            still_ended = list(
                Endpoint.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(
                    merchant_id=endpoint.merchant_id,
                    pk=endpoint.pk,
                    listen_session=True,
                    is_active=False,
                )
                .order_by()  # no join to the merchant (Meta.ordering): not its lock
                .values_list("pk", flat=True)
            )
            if not still_ended:
                continue
            deleted.append(endpoint.pk)  # delete() forgets it
            endpoint_delete(endpoint=endpoint)
    return deleted


def pull_upkeep_log(upkeep: Upkeep) -> None:
    """After commit: a line per lease spent (as the claim logs its reclaims),
    per session ended, trimmed or deleted."""
    for x in upkeep.lost:
        ids = {"delivery_id": x.delivery_id, "endpoint_id": x.endpoint_id}
        logger.info(
            "attempt delivery=%s endpoint=%s number=%d outcome=%s status=- ms=- error=%s",
            x.delivery_id,
            x.endpoint_id,
            x.number,
            "dead" if x.dead else "retry",
            ErrorKind.LEASE_EXPIRED,
            extra=ids,
        )
    for endpoint_id, dead in upkeep.trimmed.items():
        logger.warning(
            "listen session backlog full endpoint=%s: its %d oldest unfinished "
            "messages are dead (LISTEN_MAX_BACKLOG %d)",
            endpoint_id,
            dead,
            settings.LISTEN_MAX_BACKLOG,
            extra={"endpoint_id": endpoint_id},
        )
    for endpoint_id in upkeep.deleted:
        logger.info(
            "ended listen session deleted endpoint=%s",
            endpoint_id,
            extra={"endpoint_id": endpoint_id},
        )
