"""Dead dispatchers: declared dead by their heartbeat's age, their rows released.

A dispatcher whose heartbeat row is older than DISPATCHER_DEAD_AFTER_SECONDS
(measured on the database's clock, in the statement that judges) is dead.
Its delivering rows get their lease cut back to the moment it was last seen:
they are due again at once and the next claim takes them over exactly as it
takes an expired lease (a spent attempt, `lease_expired`, reclaimed counted).
The long lease stays as the backstop when no dispatcher is left to judge.

Race-free by row locks, in one short transaction that waits for nobody:

- the stale heartbeat rows are locked FOR UPDATE SKIP LOCKED and re-read:
  a beat that committed meanwhile makes its row fresh and it is left alone;
  a beat waiting for our lock lands after the judgement and reads back the
  marks (deaths, released) that tell its dispatcher to drop what it queued;
- its rows are locked SKIP LOCKED (a row being recorded is left for the next
  judgement) and only those still delivering under a live lease are touched;
- the new lease end differs from any the owner holds, so a dispatcher
  declared dead while alive (frozen, cut off) records nothing it sent late:
  every outcome and give-back is fenced on the lease (outcomes.py).

Judges are the dispatchers' heartbeat threads (heartbeat.py); two judging at
once skip each other's rows.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from deliveries.models import Delivery, DispatcherHeartbeat
from deliveries.ops import counters
from deliveries.publish.outbox import notify_dispatchers
from endpoints import probes
from relayproject.lib import citus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rescued:
    worker_id: str
    last_seen_at: datetime | None  # None: a predecessor under the same worker id
    declared: bool  # newly declared dead by this judgement
    released: int


def dispatchers_rescue(*, judge: str, dead_after: float) -> list[Rescued]:
    """Declare dead every other dispatcher whose heartbeat is older than
    `dead_after` seconds, and release the deliveries it holds."""
    rescued = []
    with transaction.atomic():
        dead = list(
            DispatcherHeartbeat.objects.select_for_update(skip_locked=True)
            .filter(last_seen_at__lt=Now() - timedelta(seconds=dead_after))
            .exclude(worker_id=judge)
            .only("pk", "worker_id", "last_seen_at", "declared_dead_at")
        )
        for row in dead:
            # Declared once per death: again only if it beat since.
            declared = (
                row.declared_dead_at is None or row.declared_dead_at < row.last_seen_at
            )
            released = _release(
                Delivery.objects.filter(claimed_by=row.worker_id),
                lease_end=row.last_seen_at,
            )
            if not (declared or released):
                continue
            DispatcherHeartbeat.objects.filter(pk=row.pk).update(
                declared_dead_at=Now() if declared else F("declared_dead_at"),
                deaths=F("deaths") + int(declared),
                released=F("released") + released,
            )
            rescued.append(Rescued(row.worker_id, row.last_seen_at, declared, released))
        _count(rescued, shard=judge)
    return rescued


def predecessor_rescue(*, worker_id: str, claimed_before: datetime) -> list[Rescued]:
    """At a dispatcher's first beat: leases under its worker id that end before
    `claimed_before` (its start plus its lease) were claimed by a predecessor
    that used the same id and is gone; its own beat keeps the row fresh, so no
    judge would ever release them."""
    with transaction.atomic():
        released = _release(
            Delivery.objects.filter(
                claimed_by=worker_id, claimed_until__lt=claimed_before
            ),
            lease_end=Now(),
        )
        rescued = [Rescued(worker_id, None, True, released)] if released else []
        _count(rescued, shard=worker_id)
    return rescued


def _release(rows, *, lease_end) -> int:
    """Cut the live leases of `rows` back to `lease_end`; how many were cut."""
    live = rows.filter(status=Delivery.Status.DELIVERING, claimed_until__gt=Now())
    # Citus locks rows only in a statement that names one shard: first the
    # merchants that have such rows (a read of every shard, no lock), then
    # each merchant's rows. One PostgreSQL locks them all in one statement.
    merchants = (
        list(live.order_by().values_list("merchant_id", flat=True).distinct())
        if citus.on()
        else [None]
    )
    taken: dict[int | None, list[str]] = {}
    for merchant_id in merchants:
        mine = live if merchant_id is None else live.filter(merchant_id=merchant_id)
        taken[merchant_id] = list(
            mine.select_for_update(skip_locked=True).values_list("pk", flat=True)
        )
    for merchant_id, mine in taken.items():
        if not mine:
            continue
        rows = Delivery.objects.filter(pk__in=mine)
        # Due at once, first in line: next_attempt_at is the lease end while
        # delivering (see Delivery.next_attempt_at). Each merchant's rows in
        # a statement on its shard on Citus.
        if merchant_id is not None:
            rows = rows.filter(merchant_id=merchant_id)
        rows.update(claimed_until=lease_end, next_attempt_at=lease_end)
        probes.probes_of_released(mine, merchant_id=merchant_id)
    return sum(len(mine) for mine in taken.values())


def _count(rescued: list[Rescued], *, shard: str) -> None:
    if not rescued:
        return
    tally = Tally()
    for r in rescued:
        tally[(counters.DISPATCHERS_DEAD, "")] += int(r.declared)
        tally[(counters.DEAD_DISPATCHER_RELEASED, "")] += r.released
    counters.counters_add(shard=shard, tally=tally)
    notify_dispatchers()  # idle dispatchers claim the released rows at once


def rescue_log(rescued: list[Rescued]) -> None:
    """After commit: one line per dispatcher declared dead or released from."""
    for r in rescued:
        if r.last_seen_at is None:
            logger.warning(
                "released %d deliveries a previous dispatcher under worker id %s held",
                r.released,
                r.worker_id,
            )
        else:
            logger.warning(
                "dispatcher %s %s (last seen %s): %d deliveries released",
                r.worker_id,
                "declared dead" if r.declared else "still dead",
                r.last_seen_at.isoformat(timespec="seconds"),
                r.released,
            )
