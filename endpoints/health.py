"""An endpoint's health row as each send moves it: the outcome's effect on
the breaker, and the rate bucket the dispatchers share.

- the breaker: an outcome's effect (`health_rows_locked`, `outcome_apply`,
  `health_rows_save`, `successes_mark`);
- the rate bucket shared by the dispatchers (`endpoint_rate_take`);
- a pull endpoint's last pull and a listen session's end (`pull_health_set`).

The row's other writes have a module each: the probe and the hands on the
breaker (staff's, the merchant's) in `endpoints.probes`, the rolling
statistics in `endpoints.health_stats`. A test
(tests/endpoints/test_health.py) fails when any other module writes the table.

What the next breaker state is stays in `endpoints.breaker` (pure, table
tested); this module reads the row, asks it, and writes the answer. The
bucket's arithmetic is `endpoints.ratelimit`'s, mirrored in one UPDATE here.

On Citus the table is distributed by merchant_id: the dispatcher's writes
name the merchant they know (`merchant_id`), so each runs on that merchant's
shard alone. A write that names only the endpoint runs on every shard, and
Citus serialises such a write with every single-shard write of the table.
On one PostgreSQL the extra condition is on the primary key's second column,
and costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest, Least
from django.db.models.lookups import GreaterThanOrEqual

from endpoints import breaker, ratelimit
from endpoints.merchant_keyed import endpoint_merchants, on_shard
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib import citus, dbfeatures
from relayproject.lib.tracing import span_event

State = EndpointHealth.State
SUCCESS_MARK_SECONDS = 1.0  # last_success_at of a healthy endpoint, at most this often
_UNCHANGED = object()


def health_create(*, endpoint: Endpoint) -> EndpointHealth:
    """The closed breaker a new endpoint starts with."""
    return EndpointHealth.objects.create(
        endpoint=endpoint,
        failure_threshold=settings.BREAKER_FAILURE_THRESHOLD,
        cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
    )


def pull_health_set(
    *,
    endpoint: Endpoint,
    last_pulled_at: datetime | None | object = _UNCHANGED,
    session_expires_at: datetime | None | object = _UNCHANGED,
    unless_pulled_since: datetime | None = None,
) -> None:
    """A pull endpoint's row (deliveries/pull/sessions.py): when a consumer
    last pulled, and until when a listen session lives. Only those given;
    nothing when it was last pulled at or after `unless_pulled_since`."""
    fields = {
        name: value
        for name, value in (
            ("last_pulled_at", last_pulled_at),
            ("session_expires_at", session_expires_at),
        )
        if value is not _UNCHANGED
    }
    if not fields:
        return
    rows = EndpointHealth.objects.filter(
        merchant_id=endpoint.merchant_id, endpoint_id=endpoint.pk
    )
    if unless_pulled_since is not None:
        rows = rows.filter(
            Q(last_pulled_at__isnull=True) | Q(last_pulled_at__lt=unless_pulled_since)
        )
    rows.update(**fields)


# --- An outcome's effect on the breaker -------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one send says about its endpoint's health."""

    endpoint_id: str
    succeeded: bool
    is_probe: bool
    error: str = ""  # the failure in a few words, for the breaker's reason
    merchant_id: int | None = None  # the endpoint's: its shard on Citus


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
    bucket = on_shard(
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
