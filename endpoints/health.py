"""Every write of EndpointHealth: one module owns the row's columns.

The row holds three things that change for different reasons, and this
module is where each is written:

- the breaker: an outcome's effect (`health_rows_locked`, `outcome_apply`,
  `health_rows_save`, `successes_mark`), the probe's bookkeeping
  (`probe_win`, `probe_taken`, `probe_none_due`, `probe_abandon`,
  `probes_of_released`), staff's hand (`endpoint_breaker_reset`,
  `endpoint_breaker_open`) and the merchant's (`endpoint_probe_now`);
- the rate bucket shared by the dispatchers (`endpoint_rate_take`);
- the rolling statistics (`stats_write`).

What the next breaker state is stays in `endpoints.breaker` (pure, table
tested); this module reads the row, asks it, and writes the answer. The
bucket's arithmetic is `endpoints.ratelimit`'s, mirrored in one UPDATE here.
A test (tests/endpoints/test_health.py) fails when another module
writes the table.

On Citus the table is distributed by merchant_id: the dispatcher's writes
name the merchant they know (`merchant_id`), so each runs on that merchant's
shard alone. A write that names only the endpoint runs on every shard, and
Citus serialises such a write with every single-shard write of the table.
Staff's writes find the merchant first (`pinned`). On one PostgreSQL the
extra condition is on the primary key's second column, and costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest, Least, Now
from django.db.models.lookups import GreaterThanOrEqual

from endpoints import breaker, ratelimit
from endpoints.merchant_keyed import endpoint_merchants, pinned
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib import citus, dbfeatures
from relayproject.lib.clock import utcnow
from relayproject.lib.tracing import span_event

State = EndpointHealth.State
SUCCESS_MARK_SECONDS = 1.0  # last_success_at of a healthy endpoint, at most this often


def health_create(*, endpoint: Endpoint) -> EndpointHealth:
    """The closed breaker a new endpoint starts with."""
    return EndpointHealth.objects.create(
        endpoint=endpoint,
        failure_threshold=settings.BREAKER_FAILURE_THRESHOLD,
        cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
    )


# --- An outcome's effect on the breaker -------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one send says about its endpoint's health."""

    endpoint_id: str
    succeeded: bool
    is_probe: bool
    error: str = ""  # the failure in a few words, for the breaker's reason
    merchant_id: int | None = None  # the endpoint's: its shard on Citus


def _on_shard(rows, merchant_id: int | None):
    """`rows` narrowed to one merchant's rows (its shard on Citus); as they are
    for a caller that does not know the merchant (correct, every shard)."""
    return rows if merchant_id is None else rows.filter(merchant_id=merchant_id)


def _per_shard(rows, merchants: dict[str, int | None]) -> list:
    """`rows` of these endpoints as one statement per merchant on Citus (a
    statement naming one merchant runs on its shard alone), as one elsewhere.
    Endpoints of an unknown merchant are looked up, on Citus only."""
    if not citus.on():
        return [rows]
    unknown = [e for e, m in merchants.items() if m is None]
    merchants = {**merchants, **endpoint_merchants(unknown)} if unknown else merchants
    return [
        rows.filter(merchant_id=m)
        for m in sorted({m for m in merchants.values() if m is not None})
    ]


def _written_sql() -> bool:
    """Every flush reads the rows at rest and marks successes: on one
    PostgreSQL as SQL written once below, not compiled by the ORM per flush
    (a flush's fixed cost, paid for each outcome at low rates). Citus (one
    statement per merchant's shard) and SQLite run the ORM forms."""
    return dbfeatures.batch_statements() and not citus.on()


_AT_REST = f"""
SELECT h.endpoint_id FROM {EndpointHealth._meta.db_table} AS h
WHERE h.endpoint_id = ANY(%(ids)s)
AND h.breaker_state = %(closed)s AND h.consecutive_failures = 0
"""
_SUCCESSES_MARK = f"""
UPDATE {EndpointHealth._meta.db_table} AS h SET last_success_at = %(now)s
WHERE h.endpoint_id = ANY(%(ids)s)
AND (h.last_success_at IS NULL OR h.last_success_at < %(stale)s)
"""


def rows_to_lock(outcomes: Iterable[Outcome]) -> dict[str, int | None]:
    """Endpoints whose health row a flush must lock and rewrite, in key order,
    with their merchant.

    A success on an endpoint whose breaker is closed with no failures counted
    changes nothing but last_success_at, so that row is read, not locked: hot
    endpoints do not serialise the dispatchers recording for them. Failures,
    probes and any breaker not at rest take the lock (the counters stay exact).
    """
    outcomes = list(outcomes)
    merchants = {o.endpoint_id: o.merchant_id for o in outcomes}
    eventful = {o.endpoint_id for o in outcomes if o.is_probe or not o.succeeded}
    quiet = {e: m for e, m in merchants.items() if e not in eventful}
    if not quiet:
        at_rest = set()  # failures and probes only: every row is locked
    elif _written_sql():
        with connection.cursor() as cursor:
            cursor.execute(_AT_REST, {"ids": list(quiet), "closed": State.CLOSED})
            at_rest = {pk for (pk,) in cursor.fetchall()}
    else:
        at_rest = {
            pk
            for rows in _per_shard(EndpointHealth.objects.all(), quiet)
            for pk in rows.filter(
                pk__in=list(quiet), breaker_state=State.CLOSED, consecutive_failures=0
            ).values_list("pk", flat=True)
        }
    # Primary-key order, so two dispatchers locking the same rows cannot deadlock.
    return {e: merchants[e] for e in sorted(set(merchants) - at_rest)}


def health_rows_locked(merchants: dict[str, int | None]) -> dict[str, EndpointHealth]:
    """Lock the health rows of these endpoints (with their merchant), creating
    any that endpoints made outside the services lack."""

    def lock(ids: list[str]) -> dict[str, EndpointHealth]:
        rows = EndpointHealth.objects.select_for_update().filter(pk__in=ids)
        # One statement per merchant's shard on Citus (it locks in no other),
        # merchants in order, then keys, as every dispatcher locks them.
        return {
            h.pk: h
            for mine in _per_shard(rows, {e: merchants[e] for e in ids})
            for h in mine.order_by("pk")
        }

    endpoint_ids = list(merchants)
    if not endpoint_ids:
        return {}
    healths = lock(endpoint_ids)
    missing = [e for e in endpoint_ids if e not in healths]
    if missing:
        EndpointHealth.objects.bulk_create(
            [
                EndpointHealth(
                    endpoint_id=e,
                    merchant_id=merchants[e],
                    failure_threshold=settings.BREAKER_FAILURE_THRESHOLD,
                    cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
                )
                for e in missing
            ],
            ignore_conflicts=True,
        )
        healths.update(lock(missing))
    return healths


def outcome_apply(health: EndpointHealth, outcome: Outcome, *, now: datetime) -> None:
    """Move a locked row's breaker (pure rules in endpoints.breaker), in memory;
    `health_rows_save` writes it."""
    state = breaker.Breaker(
        state=health.breaker_state,
        consecutive_failures=health.consecutive_failures,
        cooldown_seconds=health.cooldown_seconds,
        opened_at=health.opened_at,
        next_probe_at=health.next_probe_at,
        reason=health.breaker_reason,
    )
    # The setting as it is now, halved for a very slow endpoint (contract 6);
    # stored so that what the admin shows is what was applied.
    health.failure_threshold = breaker.effective_threshold(
        base_threshold=settings.BREAKER_FAILURE_THRESHOLD,
        p95_ms=health.p95_ms,
        samples=health.sample_count,
    )
    probing = health.breaker_state == State.HALF_OPEN
    if outcome.succeeded:
        health.last_success_at = now
        # Once open, only the probe closes it: a late success of a send made
        # before it opened does not cut the cooldown short.
        if health.breaker_state == State.CLOSED or outcome.is_probe:
            state = breaker.after_success(
                state, now=now, base_cooldown=settings.BREAKER_COOLDOWN_SECONDS
            )
    else:
        health.last_failure_at = now
        if probing and not outcome.is_probe:
            # A late result of a send from before the breaker opened: it counts,
            # but only the probe decides what happens to a half-open breaker.
            state = replace(state, consecutive_failures=state.consecutive_failures + 1)
        else:
            state = breaker.after_failure(
                state,
                now=now,
                threshold=health.failure_threshold,  # as set just above
                base_cooldown=settings.BREAKER_COOLDOWN_SECONDS,
                max_cooldown=settings.BREAKER_MAX_COOLDOWN_SECONDS,
                error=outcome.error,
            )
    _trace_breaker(health, state)
    if outcome.is_probe or state.state != State.HALF_OPEN:
        health.probe_delivery_id = ""
    health.breaker_state = state.state
    health.consecutive_failures = state.consecutive_failures
    health.cooldown_seconds = state.cooldown_seconds
    health.opened_at = state.opened_at
    health.next_probe_at = state.next_probe_at
    health.breaker_reason = state.reason[:300]


_OUTCOME_FIELDS = [
    "breaker_state",
    "failure_threshold",
    "consecutive_failures",
    "cooldown_seconds",
    "opened_at",
    "next_probe_at",
    "probe_delivery_id",
    "breaker_reason",
    "last_success_at",
    "last_failure_at",
]


def health_rows_save(
    healths: Iterable[EndpointHealth], *, now: datetime
) -> tuple[dict[str, datetime], set[str]]:
    """Write the locked rows back; returns (open endpoint -> next probe, closed ones)."""
    opened: dict[str, datetime] = {}
    closed: set[str] = set()
    for health in healths:
        health.save(update_fields=_OUTCOME_FIELDS)
        if health.breaker_state != State.CLOSED:
            opened[health.pk] = health.next_probe_at or now
        else:
            closed.add(health.pk)
    return opened, closed


def successes_mark(merchants: dict[str, int | None], *, now: datetime) -> None:
    """last_success_at of endpoints at rest (with their merchant), only where it
    is over a second old: the condition keeps a hot endpoint's row from being
    rewritten per flush."""
    if not merchants:
        return
    if _written_sql():
        with connection.cursor() as cursor:
            cursor.execute(
                _SUCCESSES_MARK,
                {
                    "ids": list(merchants),
                    "now": now,
                    "stale": now - timedelta(seconds=SUCCESS_MARK_SECONDS),
                },
            )
        return
    stale = EndpointHealth.objects.filter(pk__in=list(merchants)).filter(
        Q(last_success_at__isnull=True)
        | Q(last_success_at__lt=now - timedelta(seconds=SUCCESS_MARK_SECONDS))
    )
    for rows in _per_shard(stale, merchants):
        rows.update(last_success_at=now)


def _trace_breaker(health: EndpointHealth, state: breaker.Breaker) -> None:
    """A span event on the flush's relay.record span when the breaker moves."""
    was_open = health.breaker_state != State.CLOSED
    is_open = state.state != State.CLOSED
    if was_open == is_open:
        return
    attributes = {"relay.endpoint_id": health.pk, "relay.breaker_state": state.state}
    if is_open:
        attributes["relay.breaker_reason"] = state.reason[:300]
        attributes["relay.cooldown_seconds"] = state.cooldown_seconds
    span_event("breaker.opened" if is_open else "breaker.closed", attributes)


# --- The probe: exactly one send to an open endpoint ------------------------


def probes_due(*, now: datetime) -> list[tuple[str, int, int | None]]:
    """(endpoint, merchant, merchant's cap) of active endpoints due a probe."""
    return list(
        EndpointHealth.objects.filter(
            breaker_state__in=[State.OPEN, State.HALF_OPEN],
            next_probe_at__lte=now,
            endpoint__is_active=True,
            endpoint__merchant__is_active=True,  # held while switched off
            # A probe would send an ordinary delivery; its challenge goes first.
            endpoint__awaiting_verification=False,
        ).values_list(
            "endpoint_id", "endpoint__merchant_id", "endpoint__merchant__max_in_flight"
        )
    )


def probe_win(
    *, endpoint_id: str, merchant_id: int, now: datetime, lease_until: datetime
) -> bool:
    """Half-open the breaker if it is still due a probe; True for the one winner.

    The conditional UPDATE decides: under concurrent dispatchers only one sees
    the row still due. The probe's lease end is its next probe time, so a
    probe lost with its worker is due again once that lease has run out.
    """
    return bool(
        EndpointHealth.objects.filter(
            endpoint_id=endpoint_id,
            merchant_id=merchant_id,
            breaker_state__in=[State.OPEN, State.HALF_OPEN],
            next_probe_at__lte=now,
        ).update(breaker_state=State.HALF_OPEN, next_probe_at=lease_until)
    )


def probe_taken(*, endpoint_id: str, merchant_id: int, delivery_id: str) -> None:
    mine = {"endpoint_id": endpoint_id, "merchant_id": merchant_id}
    EndpointHealth.objects.filter(**mine).update(probe_delivery_id=delivery_id)


def probe_none_due(*, endpoint_id: str, merchant_id: int, now: datetime) -> None:
    """Nothing due to probe with: stay open and look again next time."""
    EndpointHealth.objects.filter(
        endpoint_id=endpoint_id, merchant_id=merchant_id
    ).update(breaker_state=State.OPEN, next_probe_at=now, probe_delivery_id="")


def probe_abandon(*, endpoint_id: str, merchant_id: int | None, now: datetime) -> None:
    """A probe that was never sent: the breaker goes back to open, due at once."""
    _on_shard(
        EndpointHealth.objects.filter(
            endpoint_id=endpoint_id, breaker_state=State.HALF_OPEN
        ),
        merchant_id,
    ).update(breaker_state=State.OPEN, next_probe_at=now, probe_delivery_id="")


def probes_of_released(delivery_ids: list[str], *, merchant_id: int | None) -> None:
    """A half-open breaker waiting for a probe a dead dispatcher held is due a
    new probe now, not when that lease would have ended. The deliveries are
    `merchant_id`'s, or of any merchant when it is None."""
    _on_shard(
        EndpointHealth.objects.filter(
            probe_delivery_id__in=delivery_ids, breaker_state=State.HALF_OPEN
        ),
        merchant_id,
    ).update(next_probe_at=Now())


# --- Staff's hand on the breaker --------------------------------------------


def _staff_row(endpoint_id: str):
    """The endpoint's health row, on its merchant's shard on Citus (read first:
    staff's hand knows the endpoint only)."""
    return pinned(EndpointHealth.objects.filter(endpoint_id=endpoint_id), endpoint_id)


def endpoint_breaker_reset(*, endpoint_id: str) -> None:
    _staff_row(endpoint_id).update(
        breaker_state=State.CLOSED,
        consecutive_failures=0,
        cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
        opened_at=None,
        next_probe_at=None,
        probe_delivery_id="",
        breaker_reason="",
    )


def endpoint_breaker_open(
    *, endpoint_id: str, reason: str, now: datetime | None = None
) -> None:
    """Open the breaker by hand (staff), for one base cooldown."""
    now = now or utcnow()
    cooldown = settings.BREAKER_COOLDOWN_SECONDS
    _staff_row(endpoint_id).update(
        breaker_state=State.OPEN,
        cooldown_seconds=cooldown,
        opened_at=now,
        next_probe_at=now + timedelta(seconds=cooldown),
        probe_delivery_id="",
        breaker_reason=reason[:300],
    )


def endpoint_probe_now(*, endpoint_id: str, merchant_id: int, now: datetime) -> bool:
    """A paused endpoint is due its probe now (the merchant's *Try now*);
    True when it was paused and now is due.

    Only an open breaker is touched: a half-open one has its probe in flight,
    and making it due again would let probe_win grant a second probe. The
    probe itself is still won by one dispatcher (probe_win), so two clicks
    or two dispatchers send one probe.
    """
    return bool(
        EndpointHealth.objects.filter(
            endpoint_id=endpoint_id,
            merchant_id=merchant_id,
            breaker_state=State.OPEN,
        ).update(next_probe_at=now)
    )


# --- The rate bucket --------------------------------------------------------


def endpoint_rate_take(
    *, endpoint_id: str, merchant_id: int | None, rate: float, now: float
) -> float:
    """Take one token from the endpoint's shared bucket; 0 when granted, else seconds to wait.

    One conditional UPDATE does refill and take together, so dispatchers on
    any number of hosts share the bucket exactly (the arithmetic mirrors
    endpoints.ratelimit, which holds the table-tested rules).
    """
    cap = ratelimit.capacity(rate)
    elapsed = Greatest(Value(now) - F("rate_updated_at"), Value(0.0))
    refilled = Least(Value(cap), F("rate_tokens") + elapsed * Value(rate))
    bucket = _on_shard(
        EndpointHealth.objects.filter(endpoint_id=endpoint_id), merchant_id
    )
    granted = (
        # The condition is in the UPDATE itself (no subquery), so PostgreSQL
        # re-checks it on the latest row version when two takers collide.
        bucket.filter(GreaterThanOrEqual(refilled, Value(1.0))).update(
            rate_tokens=refilled - Value(1.0),
            rate_updated_at=Greatest(F("rate_updated_at"), Value(now)),
        )
    )
    if granted:
        return 0.0
    row = bucket.values("rate_tokens", "rate_updated_at").first()
    if row is None:
        return 0.0
    tokens = ratelimit.refill(
        row["rate_tokens"], row["rate_updated_at"], rate=rate, now=now
    )
    return max((1 - tokens) / rate, 0.001)


# --- Rolling statistics -----------------------------------------------------

STAT_FIELDS = (
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "sample_count",
    "success_rate",
    "is_slow",
    "failure_threshold",
)

# Every health row in one statement: bulk_update's CASE per row and field
# cost more Python than the statistics cost SQL (50 endpoints, 8 fields).
_PG_STATS_UPDATE = f"""
UPDATE {EndpointHealth._meta.db_table} h
SET p50_ms = v.p50, p95_ms = v.p95, p99_ms = v.p99, sample_count = v.n,
    success_rate = v.rate, is_slow = v.slow, failure_threshold = v.threshold,
    stats_refreshed_at = %s
FROM unnest(%s::text[], %s::float8[], %s::float8[], %s::float8[], %s::int[],
            %s::float8[], %s::bool[], %s::int[])
     AS v(id, p50, p95, p99, n, rate, slow, threshold)
WHERE h.endpoint_id = v.id
"""


def stats_endpoint_ids() -> list[str]:
    return list(EndpointHealth.objects.values_list("pk", flat=True))


def stats_write(rows: list[tuple], *, now: datetime) -> int:
    """Write (endpoint, *STAT_FIELDS) rows; how many."""
    if not rows:
        return 0
    if dbfeatures.batch_statements():
        columns = [list(column) for column in zip(*rows, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(_PG_STATS_UPDATE, [now, *columns])
        return len(rows)
    healths = [
        EndpointHealth(
            endpoint_id=pk,
            stats_refreshed_at=now,
            **dict(zip(STAT_FIELDS, values, strict=True)),
        )
        for pk, *values in rows
    ]
    with transaction.atomic():
        EndpointHealth.objects.bulk_update(
            healths, [*STAT_FIELDS, "stats_refreshed_at"], batch_size=500
        )
    return len(healths)
