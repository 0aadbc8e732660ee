"""The claim's two PostgreSQL statements, and why they are written as they are
(the second also loads the jobs of the rows it takes, from load_sql.py).

Both are run by claiming.py (SQLite has ORM forms there) inside
prepared.statements(), so a dispatcher's session plans each once.
"""

from __future__ import annotations

import functools

from deliveries.dispatch import load_sql
from deliveries.models import Delivery
from endpoints.brokers import PULL
from endpoints.models import Endpoint, EndpointHealth, Merchant

# due.endpoints_with_due_work: the question its ORM form (SQLite) asks,
# written so that PostgreSQL's plan cannot drift with its statistics:
# - the oldest-due probe bounds (endpoint_id, next_attempt_at) by row
#   comparisons, which only delivery_endpoint_due_idx can serve in order, and
#   which end the scan at `now` (an endpoint's future retries are not read).
#   Written as `endpoint_id = e.id ORDER BY next_attempt_at`, the planner may
#   walk delivery_due_idx instead, through every endpoint's rows and the dead
#   index entries that finished deliveries leave at its front until vacuum:
#   50 ms a claim after 2,000 deliveries, against 1 ms.
# - live claims are counted in one pass over the delivering rows, not once
#   per endpoint (a probe per endpoint read them all each time), and the
#   probe runs once per endpoint (the ORM form repeats it in WHERE and ORDER);
#   each merchant's live claims are the sum of its endpoints' (merchant_live).
# - merchants first, then endpoints: `turn` numbers each merchant's endpoints
#   by their oldest due row, and the endpoints come out by turn, so every
#   merchant with due work has its first endpoint listed before any has a
#   second, whatever its endpoint count (a merchant with 600 endpoints all due
#   earlier no longer fills the list). A merchant lists no more endpoints than
#   its room under its own cap, and none once it is full. The window and the
#   sort run over the endpoints that passed, after the probes: the probes'
#   plan is the one above, whatever the merchants.
# - pull endpoints (kind "pull", deliveries/pull/) are never listed: their
#   consumers lease their rows. Their leases are no sends: merchant_live
#   leaves them out (by the endpoint it joins anyway, so the scan of the
#   delivering rows is the same), or a consumer holding 100 messages would
#   take 100 of the merchant's slots from its HTTP endpoints.
DUE = f"""
WITH live AS MATERIALIZED (
    SELECT y.endpoint_id, count(*) AS n
    FROM {Delivery._meta.db_table} AS y
    WHERE y.status = 'delivering' AND y.claimed_until > %(now)s
    GROUP BY y.endpoint_id
), merchant_live AS MATERIALIZED (
    SELECT o.merchant_id, sum(live.n) AS n
    FROM live JOIN {Endpoint._meta.db_table} AS o ON o.id = live.endpoint_id
    WHERE o.kind <> '{PULL}'
    GROUP BY o.merchant_id
), ready AS (
    SELECT e.id, e.merchant_id, COALESCE(e.max_in_flight, %(cap)s) AS cap,
        -- the endpoint's, else its merchant's default (endpoints/retry_policy.py)
        COALESCE(e.max_attempts, m.max_attempts) AS max_attempts,
        COALESCE(m.max_in_flight, %(merchant_cap)s) AS merchant_cap,
        COALESCE(m.max_in_flight, %(merchant_cap)s) - COALESCE(ml.n, 0)
            AS merchant_room,
        due.next_attempt_at,
        row_number() OVER (
            PARTITION BY e.merchant_id ORDER BY due.next_attempt_at, e.id
        ) AS turn
    FROM {Endpoint._meta.db_table} AS e
    JOIN {Merchant._meta.db_table} AS m ON m.id = e.merchant_id
    LEFT JOIN {EndpointHealth._meta.db_table} AS h ON h.endpoint_id = e.id
    LEFT JOIN live ON live.endpoint_id = e.id
    LEFT JOIN merchant_live AS ml ON ml.merchant_id = e.merchant_id
    CROSS JOIN LATERAL (
        SELECT x.next_attempt_at
        FROM {Delivery._meta.db_table} AS x
        WHERE (x.endpoint_id, x.next_attempt_at)
            >= (e.id, '-infinity'::timestamptz)
        AND (x.endpoint_id, x.next_attempt_at) <= (e.id, %(now)s)
        AND x.status IN ('pending', 'delivering')
        ORDER BY x.endpoint_id, x.next_attempt_at
        LIMIT 1
    ) AS due
    WHERE e.is_active
    -- a consumer leases a pull endpoint's rows (deliveries/pull/leasing.py)
    AND e.kind <> '{PULL}'
    -- merchant switched off by staff: held, no attempt spent, sent once it is
    -- switched on (endpoints/switched_off.py); m is joined for its cap anyway
    AND m.is_active
    -- awaiting verification: held, no attempt spent (single_claims.claim_verifications
    -- takes the one delivery that carries its challenge)
    AND NOT e.awaiting_verification
    AND (h.breaker_state = %(closed)s OR h.endpoint_id IS NULL)
    AND COALESCE(live.n, 0) < COALESCE(e.max_in_flight, %(cap)s)
    AND COALESCE(ml.n, 0) < COALESCE(m.max_in_flight, %(merchant_cap)s)
)
SELECT id, merchant_id, cap, max_attempts, merchant_cap
FROM ready
WHERE turn <= merchant_room
ORDER BY turn, next_attempt_at, id
LIMIT %(limit)s
"""


# DUE on Citus (claim_sql.DUE joins endpoints to deliveries on endpoint_id
# alone, which Citus runs only by moving rows between nodes, and it refuses
# outer joins to such results). Every join and probe here also names the
# merchant, so each shard answers for its own merchants and the coordinator
# only merges the lists: one lock-free read of every shard. The live claims
# are counted by a probe per listed endpoint (delivery_endpoint_inflight_idx)
# and summed over the listed endpoints of each merchant: they only skip full
# endpoints and merchants, as in DUE; claiming.py counts every endpoint's
# under the merchant's lock before anything is taken.
DUE_SHARDED = f"""
SELECT id, merchant_id, cap, max_attempts, merchant_cap FROM (
    SELECT e.id, e.merchant_id, COALESCE(e.max_in_flight, %(cap)s) AS cap,
        -- the endpoint's, else its merchant's default (endpoints/retry_policy.py)
        COALESCE(e.max_attempts, m.max_attempts) AS max_attempts,
        COALESCE(m.max_in_flight, %(merchant_cap)s) AS merchant_cap,
        COALESCE(m.max_in_flight, %(merchant_cap)s)
            - sum(live.n) OVER (PARTITION BY e.merchant_id) AS merchant_room,
        due.next_attempt_at,
        row_number() OVER (
            PARTITION BY e.merchant_id ORDER BY due.next_attempt_at, e.id
        ) AS turn
    FROM {Endpoint._meta.db_table} AS e
    JOIN {Merchant._meta.db_table} AS m ON m.id = e.merchant_id
    LEFT JOIN {EndpointHealth._meta.db_table} AS h
        ON h.merchant_id = e.merchant_id AND h.endpoint_id = e.id
    CROSS JOIN LATERAL (
        SELECT x.next_attempt_at
        FROM {Delivery._meta.db_table} AS x
        WHERE x.merchant_id = e.merchant_id
        AND (x.endpoint_id, x.next_attempt_at)
            >= (e.id, '-infinity'::timestamptz)
        AND (x.endpoint_id, x.next_attempt_at) <= (e.id, %(now)s)
        AND x.status IN ('pending', 'delivering')
        ORDER BY x.endpoint_id, x.next_attempt_at
        LIMIT 1
    ) AS due
    CROSS JOIN LATERAL (
        SELECT count(*) AS n
        FROM {Delivery._meta.db_table} AS y
        WHERE y.merchant_id = e.merchant_id AND y.endpoint_id = e.id
        AND y.status = 'delivering' AND y.claimed_until > %(now)s
    ) AS live
    WHERE e.is_active
    AND e.kind <> '{PULL}'  -- as in DUE; so no pull lease is counted either
    AND m.is_active  -- as in DUE
    AND NOT e.awaiting_verification  -- as in DUE
    AND (h.breaker_state = %(closed)s OR h.endpoint_id IS NULL)
    AND live.n < COALESCE(e.max_in_flight, %(cap)s)
) AS ready
WHERE turn <= merchant_room
ORDER BY turn, next_attempt_at, id
LIMIT %(limit)s
"""


# claiming._due_rows_locked: a LATERAL index scan per endpoint, bounded by row
# comparisons as in DUE, locked; then its pending rows marked delivering in
# the same statement. The locking scan's LIMIT is a number written into the
# text (the largest share, so a few texts, each prepared once), not the
# endpoint's share: with a LIMIT it cannot see, the planner counts on reading
# a tenth of an endpoint's rows, and at 100,000 behind one endpoint it chose
# the plain endpoint_id index and sorted them all (345 ms a claim, against
# 12). Each endpoint's share of the rows locked is taken above it.
#
# Not pinned (plain PostgreSQL), the rows it marks come back with what their
# jobs need (load_sql.JOB_ROWS's columns, joined here), so loading them costs
# no statement of its own after the claim: each statement a dispatcher's claiming
# thread waits for is also a wait for the GIL once its answer is in.
#
# pinned (Citus): one merchant's endpoints, and every scan and the UPDATE say
# merchant_id = %(merchant)s, so the statement is routed to that merchant's
# shard: Citus runs FOR UPDATE only in a statement that names one shard. Its
# jobs are loaded after the claim, per merchant (jobs._rows_per_merchant).
@functools.lru_cache(maxsize=64)
def lock(most: int, *, pinned: bool = False) -> str:
    """The locking statement for shares of at most `most` rows."""
    x_pin = "x.merchant_id = %(merchant)s AND " if pinned else ""
    t_pin = "AND t.merchant_id = %(merchant)s " if pinned else ""
    job = "" if pinned else f",\n    {load_sql.job_columns('taken')}"
    job_join = "" if pinned else load_sql.job_joins("taken", outer=True)
    return f"""
WITH locked AS (
    SELECT d.id, d.status, d.claimed_by, d.attempt_count, d.budget_start,
        d.endpoint_id, d.merchant_id, d.ordering_key, d.event_id
    FROM unnest(%(endpoints)s::text[], %(shares)s::int[]) AS q(endpoint_id, share)
    CROSS JOIN LATERAL (
        SELECT l.* FROM (
            SELECT x.id, x.status, x.claimed_by, x.attempt_count,
                x.budget_start, x.endpoint_id, x.merchant_id, x.ordering_key,
                x.event_id, x.next_attempt_at
            FROM {Delivery._meta.db_table} AS x
            WHERE {x_pin}(x.endpoint_id, x.next_attempt_at)
                >= (q.endpoint_id, '-infinity'::timestamptz)
            AND (x.endpoint_id, x.next_attempt_at) <= (q.endpoint_id, %(now)s)
            AND x.status IN ('pending', 'delivering')
            ORDER BY x.endpoint_id, x.next_attempt_at
            LIMIT {int(most)}
            FOR UPDATE SKIP LOCKED
        ) AS l
        ORDER BY l.next_attempt_at
        LIMIT q.share
    ) AS d
), taken AS (
    UPDATE {Delivery._meta.db_table} AS t
    SET status = 'delivering', claimed_by = %(worker)s,
        claimed_until = %(lease)s, next_attempt_at = %(lease)s
    FROM locked
    WHERE t.id = locked.id AND locked.status = 'pending' {t_pin}
    RETURNING t.id, t.ordering_key, t.attempt_count, t.budget_start,
        t.event_id, t.endpoint_id, t.merchant_id
)
SELECT locked.*, taken.id IS NOT NULL AS taken{job}
FROM locked LEFT JOIN taken ON taken.id = locked.id{job_join}
"""
