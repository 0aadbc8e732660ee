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
  idempotent publish runs in a transaction (deliveries.ingest): there the
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

from django.db import connection, transaction

from deliveries.models import PublishBucket
from endpoints import quotas
from endpoints.models import Merchant
from relayproject.limits import LimitExceeded

# w: what this publish wants; took: the merchants whose tokens were taken.
# ON CONFLICT locks the row and checks the condition on its latest version
# (a concurrent taker's commit included), so the bucket is exact across
# processes. A new bucket starts full, less this take. A merchant deleted
# since its audience was cached passes: the write then finds it gone (404).
_TAKE_SQL = """
WITH w(id, cost, rate, burst) AS (
    SELECT * FROM unnest(%s::bigint[], %s::int[], %s::float8[], %s::float8[])
),
took AS (
    INSERT INTO deliveries_publishbucket AS b (merchant_id, tokens, updated_at)
    SELECT w.id, w.burst - w.cost, %s FROM w
    JOIN endpoints_merchant m ON m.id = w.id
    ON CONFLICT (merchant_id) DO UPDATE SET
        tokens = (
            SELECT LEAST(w.burst, b.tokens + GREATEST(%s - b.updated_at, 0) * w.rate)
                - w.cost
            FROM w WHERE w.id = b.merchant_id
        ),
        updated_at = GREATEST(b.updated_at, %s)
    WHERE (
        SELECT LEAST(w.burst, b.tokens + GREATEST(%s - b.updated_at, 0) * w.rate)
            >= w.cost
        FROM w WHERE w.id = b.merchant_id
    )
    RETURNING b.merchant_id
)
SELECT w.id, took.merchant_id IS NOT NULL
    OR NOT EXISTS (SELECT 1 FROM endpoints_merchant m WHERE m.id = w.id)
FROM w LEFT JOIN took ON took.merchant_id = w.id
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
    Raises LimitExceeded when any merchant is over its rate (nothing taken).
    """
    wants = [
        (merchant, count, rate)
        for merchant, count in costs.values()
        if (rate := quotas.publish_rate(merchant)) is not None and count > 0
    ]
    if not wants:
        return
    for merchant, count, rate in wants:
        if count > rate.burst:
            raise _never(merchant, count, rate)
    if connection.vendor == "postgresql":
        refused = _take_postgres(wants, now)
    else:
        refused = _take_orm(wants, now)
    if refused:
        merchant, count, rate, wait = max(refused, key=lambda r: r[3])
        raise LimitExceeded(
            setting="PUBLISH_RATE_PER_MERCHANT",
            limit=rate.per_second,
            retry_after=wait,
            detail=f"Merchant {merchant.slug} may publish {_number(rate.per_second)} "
            f"events per second, {rate.burst} at once ({_source(merchant)}); "
            f"this request's {_events(count)} can pass in {math.ceil(wait)} s. "
            "Nothing was written.",
        )


Refusal = tuple[Merchant, int, quotas.PublishRate, float]


def _take_postgres(wants, now: float) -> list[Refusal]:
    ids = [m.pk for m, _, _ in wants]
    counts = [c for _, c, _ in wants]
    burst = [float(r.burst) for _, _, r in wants]
    with connection.cursor() as cursor:
        cursor.execute(
            _TAKE_SQL,
            [ids, counts, [r.per_second for _, _, r in wants], burst] + [now] * 4,
        )
        granted = dict(cursor.fetchall())
        taken = [(m, c, r) for m, c, r in wants if granted[m.pk]]
        if len(taken) == len(wants):
            return []
        cursor.execute(_READ_SQL, [[m.pk for m, _, _ in wants if not granted[m.pk]]])
        left = {row[0]: row[1:] for row in cursor.fetchall()}
        refused = [
            (m, c, r, _wait(c, r, *left.get(m.pk, (None, None)), now))
            for m, c, r in wants
            if not granted[m.pk]
        ]
        if taken:
            cursor.execute(
                _GIVE_BACK_SQL,
                [
                    [m.pk for m, _, _ in taken],
                    [c for _, c, _ in taken],
                    [float(r.burst) for _, _, r in taken],
                ],
            )
    return refused


def _take_orm(wants, now: float) -> list[Refusal]:
    # SQLite (development): it serialises writers; the same arithmetic.
    with transaction.atomic():
        found = PublishBucket.objects.in_bulk([m.pk for m, _, _ in wants])
        refused, updated = [], []
        for merchant, count, rate in wants:
            bucket = found.get(merchant.pk)
            tokens, at = (
                (bucket.tokens, bucket.updated_at) if bucket else (rate.burst, now)
            )
            level = _level(tokens, at, rate, now)
            if level < count:
                refused.append(
                    (merchant, count, rate, _wait(count, rate, tokens, at, now))
                )
            else:
                updated.append(
                    PublishBucket(
                        merchant_id=merchant.pk,
                        tokens=level - count,
                        updated_at=max(at, now),
                    )
                )
        if not refused:
            for bucket in updated:
                bucket.save()
    return refused


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


def _never(merchant: Merchant, count: int, rate: quotas.PublishRate) -> LimitExceeded:
    return LimitExceeded(
        setting="PUBLISH_BURST_PER_MERCHANT",
        limit=rate.burst,
        detail=f"This request publishes {_events(count)} for merchant "
        f"{merchant.slug}, which may publish at most {rate.burst} at once "
        f"({_source(merchant)}); send at most {rate.burst} per request. Nothing "
        "was written.",
    )


def _source(merchant: Merchant) -> str:
    if merchant.publish_rate_per_second is None and merchant.publish_burst is None:
        return "PUBLISH_RATE_PER_MERCHANT and PUBLISH_BURST_PER_MERCHANT"
    return "this merchant's own rate, set by staff"


def _number(value: float) -> str:
    return f"{value:g}"


def _events(count: int) -> str:
    return f"{count} event" if count == 1 else f"{count} events"
