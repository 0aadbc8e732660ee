"""The PostgreSQL text of the claim's other reads: the live claims it counts
and the jobs it loads (their secrets are read by
endpoints.selectors.live_secrets, written out there the same way). A batch
claim's jobs come back from claim_sql.lock itself, with these columns; the
rows claimed otherwise (probes, verifications, expired leases taken over)
are read by JOB_ROWS after the claim.

Their ORM forms (due.py, jobs.py, endpoints.selectors) run on SQLite, and on
Citus where a statement must name its merchant (jobs._rows_per_merchant; LIVE
is the same statement the ORM form makes there). Here the text is written
once: compiling the ORM query again on every claim cost more Python than the
statement's own round trip, and a claim woken by each publish pays it for a
row or two. Columns that need a field's conversion (JSON, encrypted) are
converted by that field in the caller, as the ORM would.
"""

from __future__ import annotations

from deliveries.models import Delivery, Event
from deliveries.pull.leasing import PULLED_BY
from endpoints.models import Endpoint, Merchant

_D = Delivery._meta.db_table
_V = Event._meta.db_table
_E = Endpoint._meta.db_table
_M = Merchant._meta.db_table

# due.live_claims: delivering rows with a live lease, per endpoint, of these
# merchants (the delivery's own merchant_id: no join). A pull consumer's
# lease (claimed_by PULLED_BY, deliveries/pull/leasing.py) is no send: it
# takes none of the merchant's room.
LIVE = f"""
SELECT y.endpoint_id, y.merchant_id, count(*)
FROM {_D} AS y
WHERE y.status = 'delivering' AND y.claimed_until > %(now)s
AND y.claimed_by <> '{PULLED_BY}'
AND y.merchant_id = ANY(%(merchants)s)
GROUP BY y.endpoint_id, y.merchant_id
"""


# A job's columns, in the order of jobs.COLUMNS (the ORM form's), from the
# deliveries `d` joined to their event `v` and endpoint `e` by job_joins. The
# joins name the merchant as the models' merchant-scoped foreign keys do.
# claim_sql.lock returns them too, for the rows it marks, with `d` its
# UPDATE's RETURNING; they are named apart from the claim's own columns.
def job_columns(d: str) -> str:
    return f"""{d}.id AS job_id, {d}.ordering_key AS job_ordering_key,
    {d}.attempt_count AS job_attempt_count, {d}.budget_start AS job_budget_start,
    v.id AS job_event_id, v.type, v.data, v.created_at,
    v.merchant_id AS job_merchant_id, v.traceparent,
    e.id AS job_endpoint_id, e.url, e.max_attempts, e.rate_limit_per_second,
    e.headers, e.max_in_flight, e.permanent_statuses,
    e.kind, e.target, e.broker_credentials, e.signing, e.signing_private_key,
    e.retry_schedule, e.timeout_seconds, e.credentials_version,
    m.retry_schedule AS job_m_retry_schedule, m.max_attempts AS job_m_max_attempts,
    m.timeout_seconds AS job_m_timeout_seconds, m.broker_hosts AS job_m_broker_hosts"""


def job_joins(d: str, *, outer: bool = False) -> str:
    """The event, endpoint and merchant of each delivery `d` (outer: a claim's
    locked row that was not marked has no `d` and no job). The merchant's
    defaults (retry policy, broker hosts) come in the same statement: on
    Citus its table is a reference table, on every node."""
    join = "LEFT JOIN" if outer else "JOIN"
    return f"""
{join} {_V} AS v ON v.id = {d}.event_id AND v.merchant_id = {d}.merchant_id
{join} {_E} AS e ON e.id = {d}.endpoint_id AND e.merchant_id = {d}.merchant_id
{join} {_M} AS m ON m.id = e.merchant_id"""


# jobs._rows: rows claimed earlier (probes, verifications, leases taken over)
# with their event and endpoint, in the order the ORM form gives.
JOB_ROWS = f"""
SELECT {job_columns("d")}
FROM {_D} AS d{job_joins("d")}
WHERE d.id = ANY(%(ids)s) AND d.claimed_until = %(lease)s
ORDER BY d.next_attempt_at, d.id
"""
