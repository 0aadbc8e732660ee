"""The publish rate per merchant: a token bucket shared by every web process.

An accepted publish takes one token per event (a batch of 100 takes 100)
from each of its merchants' buckets, refilled at the merchant's rate up to
its burst (endpoints.quotas). A request over it is refused whole with
LimitExceeded: a 429 with the seconds until it would pass, or, when it holds
more events than the burst, a 422 (waiting would never help).

One statement, an UPSERT that refills and takes, run where `drafts_publish`
has validated and fanned out the events and before it writes them (a
refused request reads the bucket once more, to say when to retry). Why
there, and not inside the writing statement or before the fan-out:

- A request refused for any reason writes nothing: one refused by the
  validator or the fan-out limit never reaches the bucket, one refused by
  the bucket never reaches the write.
- Outside the API's write, which is a statement of its own in autocommit:
  the bucket's row lock lasts this statement only (microseconds), not the
  insert of up to 10,000 deliveries, so one merchant's concurrent publishes
  from many processes do not queue behind each other's writes. An
  idempotent publish runs in a transaction (deliveries.publish.ingest): there the
  take comes after the write, just before the commit, so the row is held
  for microseconds too, a replay of a stored event takes nothing, and a
  refusal rolls the write back.
- Tokens spent on a publish whose write then fails (the database went away)
  are not given back: the count errs towards limiting.
- The fan-out a refused request did first is bounded by
  MAX_DELIVERIES_PER_REQUEST and the filters' cost limit.

In-process publishing (the platform's own code, event_publish) is not rate
limited: inside the caller's transaction the row would stay locked until
that commits, and the caller's business transaction would fail on a limit
meant for API clients.
"""

from __future__ import annotations

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
# for more than its burst (that request is refused whole, a 422); took: the
# merchants whose tokens were taken. ON CONFLICT locks the row and checks the
# condition on its latest version (a concurrent taker's commit included), so
# the bucket is exact across processes. A new bucket starts full, less this
# take. A merchant deleted since its audience was cached passes: the write
# then finds it gone (404).
_TAKE_SQL = """
WITH asked(id, cost) AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(costs)s::int[])
),
w AS (
    SELECT asked.id, asked.cost,
        COALESCE(m.publish_rate_per_second, %(rate)s)::float8 AS rate,
        COALESCE(m.publish_burst, %(burst)s)::float8 AS burst,
        m.publish_rate_per_second IS NULL AND m.publish_burst IS NULL AS defaults
    FROM asked JOIN endpoints_merchant m ON m.id = asked.id
),
limited AS (
    SELECT * FROM w WHERE w.rate > 0 AND NOT EXISTS (
        SELECT 1 FROM w o WHERE o.rate > 0 AND o.cost > o.burst
    )
),
took AS (
    INSERT INTO deliveries_publishbucket AS b (merchant_id, tokens, updated_at)
    SELECT l.id, l.burst - l.cost, %(now)s FROM limited l
    ON CONFLICT (merchant_id) DO UPDATE SET
        tokens = (
            SELECT LEAST(l.burst, b.tokens + GREATEST(%(now)s - b.updated_at, 0)
                * l.rate) - l.cost
            FROM limited l WHERE l.id = b.merchant_id
        ),
        updated_at = GREATEST(b.updated_at, %(now)s)
    WHERE (
        SELECT LEAST(l.burst, b.tokens + GREATEST(%(now)s - b.updated_at, 0)
            * l.rate) >= l.cost
        FROM limited l WHERE l.id = b.merchant_id
    )
    RETURNING b.merchant_id
)
SELECT asked.id, w.rate, w.burst, w.defaults,
    took.merchant_id IS NOT NULL OR w.id IS NULL OR w.rate <= 0
FROM asked LEFT JOIN w ON w.id = asked.id
LEFT JOIN took ON took.merchant_id = asked.id
"""

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
    """
    wants = [(merchant, count) for merchant, count in costs.values() if count > 0]
    if not wants:
        return
    if dbfeatures.batch_statements():
        rows = _take_postgres(wants, now)
    else:
        rows = _take_orm(wants, now)
    for merchant, count, rate, own, _granted in rows:
        if rate is not None and count > rate.burst:
            raise _never(merchant, count, rate, own)
    refused = [row for row in rows if not row[4]]
    if not refused:
        return
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


def _take_postgres(wants, now: float) -> list[Row]:
    rate, burst = _defaults()
    params = {
        "ids": [m.pk for m, _ in wants],
        "costs": [c for _, c in wants],
        "rate": float(rate),
        "burst": float(burst),
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_SQL, params)
        read = {row[0]: row[1:] for row in cursor.fetchall()}
        rows = [_row(m, c, *read[m.pk]) for m, c in wants]
        taken = [(m, c, r) for m, c, r, _, granted in rows if granted and r]
        if len(taken) < len(rows) and taken:
            # Partly refused: give back what the others took.
            cursor.execute(
                _GIVE_BACK_SQL,
                [
                    [m.pk for m, _, _ in taken],
                    [c for _, c, _ in taken],
                    [float(r.burst) for _, _, r in taken],
                ],
            )
    return rows


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
