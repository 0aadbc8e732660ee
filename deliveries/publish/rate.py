"""The publish rate per merchant: a token bucket shared by every web process.

An accepted publish takes one token per event (a batch of 100 takes 100)
from each of its merchants' buckets, refilled at the merchant's rate up to
its burst (endpoints.quotas). A request over it is refused whole with
LimitExceeded: a 429 with the seconds until it would pass, or, when it holds
more events than the burst, a 422 (waiting would never help).

An UPSERT that refills and takes, run once `drafts_publish` has validated
and fanned out the events. For the API's plain publish it is part of the
statement that writes them (CTEs of deliveries.publish.outbox's write): one
round trip and one commit (its WAL flush) for both, where a statement of its
own cost a second commit, the larger part of a publish under load. (A
refused request reads the bucket once more, to say when to retry.) Why
there:

- A request refused for any reason writes nothing: one refused by the
  validator or the fan-out limit never reaches the statement; in the
  statement, the events and deliveries are inserted only if every merchant's
  take was granted (`GRANTED_SQL`), and nothing is taken if the cached
  audiences it checks have changed (the caller fans out again and retries).
- The bucket's row stays locked until that statement commits: the write of a
  publish's rows (about a millisecond for one event) plus the commit, where
  a take of its own held it for its own commit; one merchant's publishes
  from many processes queue on that row for about as long as before, since
  the commit's WAL flush is most of either. An idempotent publish runs in a
  transaction (deliveries.publish.ingest): there the take is a statement of
  its own after the write, just before the commit, so a replay of a stored
  event takes nothing, and a refusal rolls the write back.
- A publish whose statement fails (the database went away) takes nothing
  either: the take and the write commit together or not at all. A batch refused for one merchant gives back what it took from the others
  (`_give_back`, one more statement on that refusal only).
- The fan-out a refused request did first is bounded by
  MAX_DELIVERIES_PER_REQUEST and the filters' cost limit.

In-process publishing (the platform's own code, event_publish) is not rate
limited: inside the caller's transaction the row would stay locked until
that commits, and the caller's business transaction would fail on a limit
meant for API clients.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from django.conf import settings
from django.db import connection, transaction

from deliveries.models import PublishBucket
from endpoints import quotas
from endpoints.models import Merchant
from relayproject.lib import dbfeatures
from relayproject.lib.limits import LimitExceeded

# asked: what this publish wants; w: with each merchant's rate and burst read
# from its row in this statement (COALESCE with the settings), not from the
# merchant the caller holds, which may be a cached copy from before staff
# changed the limit; limited: those rate limited, none at all when one asks
# for more than its burst (that request is refused whole, a 422), nor when
# the guard (the writing statement's check of cached audiences) fails; took:
# the merchants whose tokens were taken; verdict: each merchant's rate as
# read and whether it may publish. ON CONFLICT locks the row and checks the
# condition on its latest version (a concurrent taker's commit included), so
# the bucket is exact across processes. A new bucket starts full, less this
# take. A merchant deleted since its audience was cached passes: the write
# then finds it gone (404). Positional parameters (see _params), so that the
# writing statement can carry these as CTEs of its own.
_TAKE_CTES = """
asked(id, cost) AS (
    SELECT * FROM unnest(%s::bigint[], %s::int[])
),
w AS (
    SELECT asked.id, asked.cost,
        COALESCE(m.publish_rate_per_second, %s)::float8 AS rate,
        COALESCE(m.publish_burst, %s)::float8 AS burst,
        m.publish_rate_per_second IS NULL AND m.publish_burst IS NULL AS defaults,
        %s::float8 AS now
    FROM asked JOIN endpoints_merchant m ON m.id = asked.id
),
limited AS (
    SELECT * FROM w WHERE w.rate > 0 AND NOT EXISTS (
        SELECT 1 FROM w o WHERE o.rate > 0 AND o.cost > o.burst
    ) AND {guard}
),
took AS (
    INSERT INTO deliveries_publishbucket AS b (merchant_id, tokens, updated_at)
    SELECT l.id, l.burst - l.cost, l.now FROM limited l
    ON CONFLICT (merchant_id) DO UPDATE SET
        tokens = (
            SELECT LEAST(l.burst, b.tokens + GREATEST(l.now - b.updated_at, 0)
                * l.rate) - l.cost
            FROM limited l WHERE l.id = b.merchant_id
        ),
        updated_at = GREATEST(b.updated_at, EXCLUDED.updated_at)
    WHERE (
        SELECT LEAST(l.burst, b.tokens + GREATEST(l.now - b.updated_at, 0)
            * l.rate) >= l.cost
        FROM limited l WHERE l.id = b.merchant_id
    )
    RETURNING b.merchant_id
),
verdict AS (
    SELECT asked.id, w.rate, w.burst, w.defaults,
        took.merchant_id IS NOT NULL OR w.id IS NULL OR w.rate <= 0 AS granted
    FROM asked LEFT JOIN w ON w.id = asked.id
    LEFT JOIN took ON took.merchant_id = asked.id
)"""

# What a writing statement that carries the take adds: a condition on its
# rows (every merchant may publish) and one answer, the verdict as JSON text
# (one value whatever the number of merchants; read only on a refusal).
GRANTED_SQL = "NOT EXISTS (SELECT 1 FROM verdict WHERE NOT verdict.granted)"
VERDICT_SQL = (
    "(SELECT json_agg(json_build_array(id, rate, burst, defaults, granted))::text"
    " FROM verdict)"
)

# A refused take reads the buckets again for its Retry-After: the take's own
# snapshot predates the commit it waited for, so only a new statement sees
# what is left. Refused requests alone pay it.
_READ_SQL = """
SELECT merchant_id, tokens, updated_at FROM deliveries_publishbucket
WHERE merchant_id = ANY(%s)
"""

# Gives back what a partly refused publish took from the other merchants.
_GIVE_BACK_SQL = """
UPDATE deliveries_publishbucket b
SET tokens = LEAST(g.burst, b.tokens + g.cost)
FROM unnest(%s::bigint[], %s::int[], %s::float8[]) AS g(id, cost, burst)
WHERE b.merchant_id = g.id
"""


def publish_rate_take(*, costs: Mapping[int, tuple[Merchant, int]], now: float) -> None:
    """Take `events` tokens from each merchant's bucket, all or none.

    costs: merchant id -> (merchant, events it publishes); now: unix seconds.
    The merchant's rate and burst are read from its row as the tokens are
    taken (the merchant given may be stale). Raises LimitExceeded when any
    merchant is over its rate or asks for more than its burst (nothing taken).
    A statement of its own; the API's plain publish carries the same take in
    its writing statement instead (take_ctes).
    """
    wants = _wants(costs)
    if not wants:
        return
    if dbfeatures.batch_statements():
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH {take_ctes(guard='TRUE')} "
                "SELECT id, rate, burst, defaults, granted FROM verdict",
                take_params(costs, now),
            )
            read = {row[0]: row[1:] for row in cursor.fetchall()}
        rows = _rows(wants, read)
    else:
        rows = _take_orm(wants, now)
    _judge(rows, now)


def take_ctes(*, guard: str) -> str:
    """The take as CTEs for a statement of PostgreSQL (`asked` ... `verdict`):
    it takes nothing unless the SQL boolean guard holds. Its parameters are
    take_params', in this order, where the CTEs stand in the statement."""
    return _TAKE_CTES.format(guard=guard)


def take_params(costs: Mapping[int, tuple[Merchant, int]], now: float) -> list:
    wants = _wants(costs)
    rate, burst = _defaults()
    return [
        [m.pk for m, _ in wants],
        [c for _, c in wants],
        float(rate),
        float(burst),
        now,
    ]


def take_judge(
    costs: Mapping[int, tuple[Merchant, int]], verdict: str | None, now: float
) -> None:
    """After a statement that carried take_ctes: raise LimitExceeded as
    publish_rate_take does, from its VERDICT_SQL answer (JSON text)."""
    wants = _wants(costs)
    if not wants:
        return
    read = {id: tuple(rest) for id, *rest in json.loads(verdict or "[]")}
    _judge(_rows(wants, read), now)


def _wants(costs: Mapping[int, tuple[Merchant, int]]) -> list[tuple[Merchant, int]]:
    return [(merchant, count) for merchant, count in costs.values() if count > 0]


def _judge(rows: list[Row], now: float) -> None:
    for merchant, count, rate, own, _granted in rows:
        if rate is not None and count > rate.burst:
            raise _never(merchant, count, rate, own)
    refused = [row for row in rows if not row[4]]
    if not refused:
        return
    _give_back(rows)
    waits = _waits(refused, now)
    merchant, count, rate, own, _ = max(refused, key=lambda r: waits[r[0].pk])
    wait = waits[merchant.pk]
    raise LimitExceeded(
        setting="PUBLISH_RATE_PER_MERCHANT",
        limit=rate.per_second,
        retry_after=wait,
        detail=f"Merchant {merchant.slug} may publish {_number(rate.per_second)} "
        f"events per second, {rate.burst} at once ({_source(own)}); "
        f"this request's {_events(count)} can pass in {math.ceil(wait)} s. "
        "Nothing was written.",
    )


# (merchant, events, its rate as read with the take or None when not
# limited, whether staff set its own, whether the take was granted)
Row = tuple[Merchant, int, quotas.PublishRate | None, bool, bool]


def _defaults() -> tuple[float, int]:
    return settings.PUBLISH_RATE_PER_MERCHANT, settings.PUBLISH_BURST_PER_MERCHANT


def _rows(wants, read: Mapping[int, tuple]) -> list[Row]:
    # A merchant the statement did not answer for passes (as one deleted).
    return [_row(m, c, *read.get(m.pk, (None, None, False, True))) for m, c in wants]


def _give_back(rows: list[Row]) -> None:
    """Partly refused: give back what the others took (PostgreSQL took them
    in a statement that has committed; on SQLite nothing was taken)."""
    taken = [(m, c, r) for m, c, r, _, granted in rows if granted and r]
    if not taken or not dbfeatures.batch_statements():
        return
    with connection.cursor() as cursor:
        cursor.execute(
            _GIVE_BACK_SQL,
            [
                [m.pk for m, _, _ in taken],
                [c for _, c, _ in taken],
                [float(r.burst) for _, _, r in taken],
            ],
        )


def _row(merchant, count, rate, burst, defaults, granted) -> Row:
    if rate is None or rate <= 0:  # not limited, or deleted meanwhile
        return (merchant, count, None, False, True)
    limit = quotas.PublishRate(per_second=rate, burst=int(burst))
    return (merchant, count, limit, not defaults, bool(granted))


def _waits(refused: list[Row], now: float) -> dict[int, float]:
    """Seconds each refused merchant must wait, from its bucket read anew: the
    take's own snapshot predates the commit it waited for."""
    ids = [m.pk for m, *_ in refused]
    if dbfeatures.batch_statements():
        with connection.cursor() as cursor:
            cursor.execute(_READ_SQL, [ids])
            left = {row[0]: row[1:] for row in cursor.fetchall()}
    else:
        left = {
            b.merchant_id: (b.tokens, b.updated_at)
            for b in PublishBucket.objects.filter(merchant_id__in=ids)
        }
    return {
        m.pk: _wait(c, r, *left.get(m.pk, (None, None)), now)
        for m, c, r, _, _ in refused
    }


def _take_orm(wants, now: float) -> list[Row]:
    # SQLite (development): it serialises writers; the same arithmetic, with
    # the rate read from the merchant's row as _TAKE_SQL does.
    with transaction.atomic():
        fresh = Merchant.objects.in_bulk([m.pk for m, _ in wants])
        rows: list[Row] = []
        for merchant, count in wants:
            row = fresh.get(merchant.pk)
            rate = quotas.publish_rate(row) if row else None
            own = bool(row) and (
                row.publish_rate_per_second is not None or row.publish_burst is not None
            )
            rows.append((merchant, count, rate, own, True))
        if any(r and c > r.burst for _, c, r, _, _ in rows):
            return rows
        found = PublishBucket.objects.in_bulk([m.pk for m, _ in wants])
        updated = []
        for i, (merchant, count, rate, own, _) in enumerate(rows):
            if rate is None:
                continue
            bucket = found.get(merchant.pk)
            tokens, at = (
                (bucket.tokens, bucket.updated_at) if bucket else (rate.burst, now)
            )
            level = _level(tokens, at, rate, now)
            if level < count:
                rows[i] = (merchant, count, rate, own, False)
            else:
                updated.append(
                    PublishBucket(
                        merchant_id=merchant.pk,
                        tokens=level - count,
                        updated_at=max(at, now),
                    )
                )
        if all(row[4] for row in rows):
            for bucket in updated:
                bucket.save()
    return rows


def _level(tokens: float, updated_at: float, rate: quotas.PublishRate, now: float):
    """The tokens at now (as _TAKE_SQL refills them): clocks of different web
    hosts disagree slightly, and a reading from the past takes nothing away."""
    elapsed = max(0.0, now - updated_at)
    return min(float(rate.burst), tokens + elapsed * rate.per_second)


def _wait(
    count: int, rate: quotas.PublishRate, tokens, updated_at, now: float
) -> float:
    """Seconds until count tokens will be there (the bucket as last read)."""
    if tokens is None:  # deleted with its merchant meanwhile
        tokens, updated_at = 0.0, now
    return max((count - _level(tokens, updated_at, rate, now)) / rate.per_second, 0.001)


def _never(
    merchant: Merchant, count: int, rate: quotas.PublishRate, own: bool
) -> LimitExceeded:
    return LimitExceeded(
        setting="PUBLISH_BURST_PER_MERCHANT",
        limit=rate.burst,
        detail=f"This request publishes {_events(count)} for merchant "
        f"{merchant.slug}, which may publish at most {rate.burst} at once "
        f"({_source(own)}); send at most {rate.burst} per request. Nothing "
        "was written.",
    )


def _source(own: bool) -> str:
    if not own:
        return "PUBLISH_RATE_PER_MERCHANT and PUBLISH_BURST_PER_MERCHANT"
    return "this merchant's own rate, set by staff"


def _number(value: float) -> str:
    return f"{value:g}"


def _events(count: int) -> str:
    return f"{count} event" if count == 1 else f"{count} events"
