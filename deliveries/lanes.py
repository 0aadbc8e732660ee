"""Ordered lanes: one delivery at a time per (endpoint, ordering key).

An endpoint with `ordered` gets the events that share an ordering_key in
publish order, the next only once the previous one succeeded or went dead.
A lane is its deliveries with that key (Delivery.ordering_key, copied from
the event at publish when the endpoint is ordered). Its head is its one row
pending or delivering, which the claim sees like any other; the rows behind
it are `waiting`, a status no claim reads (the due indexes are partial on
pending and delivering), so a claim costs the same with one row or 100,000
behind a head, and retries, breakers, rate limits, leases and reclaims keep
the order by keeping the head the only row that can be sent.

Four writes touch a lane, each under the lane's transaction-level advisory
lock, taken before it reads the lane, so that two of them never decide from
the same picture:
- a publish (`deliveries_enqueue`): the first new row of a lane with no
  unfinished row is its head (pending), every other one waits, numbered
  after the lane's tail (lane_seq: the order the publishes took the lock);
- the record of a head's last outcome, success or dead letter
  (`lanes_advance`, in the same transaction as that record, which the
  lease fences): the lane's oldest waiting row becomes pending;
- the claim that finds a head's lease expired with no attempt left (dead
  on reclaim): `lanes_advance` too, as do a pull endpoint's ack, nack and
  lease expiry (deliveries/pull/);
- a listen session's backlog trim (deliveries/pull/expiry.py), which takes
  the locks of the lanes it trims before it locks their rows.
Without the lock, a publish that read the lane before a record committed
would park its row behind a head that is gone, and nobody would promote it;
two publishes would both see an empty lane and make two heads.

A replay of a laned row leaves the lane (deliveries/replay.py): it is sent
out of order, marked out_of_order, and its outcome promotes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import connection
from django.db.models import Max, Q

from deliveries.models import Delivery
from relayproject.lib import citus, dbfeatures

# pg_advisory_xact_lock(LANE_LOCK_SPACE, key): the two-key form, apart from
# the one-key locks (idempotency) and the claim's merchant locks (0x726D).
LANE_LOCK_SPACE = 0x6C6E

# (merchant_id, endpoint_id, ordering_key)
Lane = tuple[int, str, str]

_TABLE = Delivery._meta.db_table
_LANES = "unnest(%(m)s::bigint[], %(e)s::text[], %(k)s::text[]) AS q(m, e, k)"
_HEAD = (
    f"SELECT 1 FROM {_TABLE} AS h WHERE h.merchant_id = q.m AND h.endpoint_id = q.e "
    "AND h.ordering_key = q.k AND h.ordering_key <> '' "
    "AND h.status IN ('pending', 'delivering')"
)
# Each lane's tail: its head's place, or its last waiting row's (the head
# index has no lane_seq; a lane has one head row, read from the table).
_TAILS_SQL = f"""
SELECT q.e, q.k, GREATEST(
    (SELECT max(h.lane_seq) FROM {_TABLE} AS h WHERE h.merchant_id = q.m
     AND h.endpoint_id = q.e AND h.ordering_key = q.k AND h.ordering_key <> ''
     AND h.status IN ('pending', 'delivering')),
    (SELECT w.lane_seq FROM {_TABLE} AS w WHERE w.merchant_id = q.m
     AND w.endpoint_id = q.e AND w.ordering_key = q.k AND w.status = 'waiting'
     ORDER BY w.lane_seq DESC LIMIT 1))
FROM {_LANES}
"""
# Each lane without a head: its oldest waiting row becomes the head.
_ADVANCE_SQL = f"""
UPDATE {_TABLE} AS d SET status = 'pending', next_attempt_at = %(now)s
FROM (
    SELECT q.m, (
        SELECT w.id FROM {_TABLE} AS w WHERE w.merchant_id = q.m
        AND w.endpoint_id = q.e AND w.ordering_key = q.k AND w.status = 'waiting'
        ORDER BY w.lane_seq LIMIT 1
    ) AS id
    FROM {_LANES}
    WHERE NOT EXISTS ({_HEAD})
) AS n
WHERE d.id = n.id AND d.merchant_id = n.m AND d.status = 'waiting'
RETURNING d.id
"""


def lane_lock_key(endpoint_id: str, ordering_key: str) -> int:
    """The lane's advisory lock key (an int4); a collision only serialises
    two lanes' writes, it never mixes their rows."""
    digest = hashlib.blake2b(
        f"{endpoint_id}\0{ordering_key}".encode(), digest_size=4
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def lanes_lock(lanes: Iterable[Lane]) -> None:
    """Take these lanes' locks, to the end of the transaction, in one order
    (sorted keys), so two writers of the same lanes never deadlock. Nothing
    to take where one process writes at a time (SQLite)."""
    keys = sorted({lane_lock_key(e, k) for _, e, k in lanes})
    if not keys or not dbfeatures.shared_by_many_processes():
        return
    with connection.cursor() as cursor:
        # unnest yields the array in order; the aggregate takes each lock as
        # its row arrives.
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(%s, k)) FROM unnest(%s::int[]) AS k",
            [LANE_LOCK_SPACE, keys],
        )


def _one_statement() -> bool:
    """All lanes in one statement: PostgreSQL. On Citus a statement per lane
    (the ORM form, naming its merchant, so each runs on its shard), and on
    SQLite too."""
    return dbfeatures.batch_statements() and not citus.on()


def _columns(lanes: Sequence[Lane]) -> dict[str, list]:
    return {
        "m": [m for m, _, _ in lanes],
        "e": [e for _, e, _ in lanes],
        "k": [k for _, _, k in lanes],
    }


def lanes_tails(lanes: Sequence[Lane]) -> dict[tuple[str, str], int]:
    """(endpoint, key) -> the lane_seq of its last unfinished row, for the
    lanes that have one (a head, or rows waiting). Read under their locks."""
    if not lanes:
        return {}
    if _one_statement():
        with connection.cursor() as cursor:
            cursor.execute(_TAILS_SQL, _columns(lanes))
            return {
                (e, k): tail for e, k, tail in cursor.fetchall() if tail is not None
            }
    tails = {}
    for merchant_id, endpoint_id, key in lanes:
        tail = Delivery.objects.filter(
            Q(status__in=Delivery.Status.UNFINISHED)
            | Q(status=Delivery.Status.WAITING),
            ~Q(ordering_key=""),
            merchant_id=merchant_id,
            endpoint_id=endpoint_id,
            ordering_key=key,
        ).aggregate(tail=Max("lane_seq"))["tail"]
        if tail is not None:
            tails[(endpoint_id, key)] = tail
    return tails


def deliveries_enqueue(deliveries: Sequence[Delivery]) -> None:
    """Give laned deliveries about to be written their status and place:
    the head of an empty lane is pending, every other row waits behind the
    lane's tail, in the order given (a batch's publish order). Call inside
    the writing transaction: the locks are held until it commits."""
    laned = [d for d in deliveries if d.ordering_key]
    if not laned:
        return
    lanes = list(
        dict.fromkeys((d.merchant_id, d.endpoint_id, d.ordering_key) for d in laned)
    )
    lanes_lock(lanes)
    tails = lanes_tails(lanes)
    for delivery in laned:
        lane = (delivery.endpoint_id, delivery.ordering_key)
        tail = tails.get(lane)
        if tail is None:
            delivery.status = Delivery.Status.PENDING
            delivery.lane_seq = 1
        else:
            delivery.status = Delivery.Status.WAITING
            delivery.lane_seq = tail + 1
        tails[lane] = delivery.lane_seq


def lanes_advance(*, lanes: Iterable[Lane], now: datetime) -> list[str]:
    """The lanes whose head has just had its last outcome recorded (success
    or dead letter) go on: each one's oldest waiting row becomes pending, due
    now. Call in the transaction that records those outcomes, after their
    fenced UPDATE, so the promotion commits exactly when the outcome does.
    A lane that still has a head (an out-of-order row, a double call) is
    left alone. Returns the ids promoted."""
    lanes = list(dict.fromkeys(lane for lane in lanes if lane[2]))
    if not lanes:
        return []
    lanes_lock(lanes)
    if _one_statement():
        with connection.cursor() as cursor:
            cursor.execute(_ADVANCE_SQL, {**_columns(lanes), "now": now})
            return [row[0] for row in cursor.fetchall()]
    promoted = []
    for merchant_id, endpoint_id, key in lanes:
        lane = Delivery.objects.filter(
            merchant_id=merchant_id, endpoint_id=endpoint_id, ordering_key=key
        )
        heads = lane.filter(status__in=Delivery.Status.UNFINISHED)
        if heads.exclude(ordering_key="").exists():
            continue
        head = (
            lane.filter(status=Delivery.Status.WAITING)
            .order_by("lane_seq")
            .values_list("pk", flat=True)
            .first()
        )
        if head is not None:
            lane.filter(pk=head, status=Delivery.Status.WAITING).update(
                status=Delivery.Status.PENDING, next_attempt_at=now
            )
            promoted.append(head)
    return promoted
