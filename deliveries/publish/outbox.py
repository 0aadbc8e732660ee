"""Writing events and their deliveries: one statement, one NOTIFY a transaction.

On PostgreSQL a publish of any size is one data-modifying statement: the
events, their deliveries and the NOTIFY that wakes idle dispatchers travel in
one round trip. Outside a transaction that statement is its own transaction
(PostgreSQL runs a statement atomically), so the API needs no BEGIN/COMMIT;
inside the caller's transaction it is part of theirs (a transactional outbox).
Foreign keys are DEFERRABLE INITIALLY DEFERRED, so deliveries may name events
written by the same statement. When the fan-out used cached audiences, the
same statement checks they still hold (endpoints.audiences) and writes
nothing if one does not.

PostgreSQL folds repeated NOTIFYs on one channel in a transaction, but each
one still costs a statement: the first publish in a transaction carries the
NOTIFY, and the rest of the transaction knows it was sent (`_notified`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from deliveries.lanes import deliveries_enqueue
from deliveries.models import Delivery, Event
from deliveries.publish.rate import (
    GRANTED_SQL,
    VERDICT_SQL,
    publish_rate_take,
    take_ctes,
    take_judge,
    take_params,
)
from endpoints.audiences import AudienceChanged, guard_sql
from endpoints.models import Merchant
from relayproject.lib import citus, dbfeatures, rowsql

NOTIFY_CHANNEL = "relay_deliveries"

_BY_EVENT = frozenset({"event_id"})  # deliveries of unwritten events are skipped


@dataclass(frozen=True)
class Take:
    """Publish-bucket tokens a write takes: merchant id -> (merchant, events),
    at now (unix seconds); see deliveries.publish.rate."""

    costs: Mapping[int, tuple[Merchant, int]]
    now: float


@dataclass
class Draft:
    """An event about to be written, with the deliveries fan-out chose."""

    event: Event
    data_json: str  # event.data as JSON text, encoded once
    deliveries: list[Delivery] = field(default_factory=list)


def drafts_write(
    drafts: Sequence[Draft],
    *,
    only_new_key: bool = False,
    unchanged: Mapping[int, str] | None = None,
    rate: Take | None = None,
) -> bool:
    """Write drafts atomically; False if nothing was written because an event
    with the (one) draft's idempotency key is stored already (only_new_key).

    unchanged: merchant id -> fingerprint of the cached audience the drafts
    were fanned out to (endpoints.audiences); checked in the writing
    statement, which writes nothing and raises AudienceChanged if one moved.

    On PostgreSQL the key is looked up in the writing statement, whose
    snapshot must be younger than the caller's lock on that key (see
    deliveries.publish.ingest): partitioned events have no unique index on the key.

    rate: take these tokens from the merchants' publish buckets first
    (deliveries.publish.rate), all or none; raises LimitExceeded, having
    written nothing, when one is refused. On PostgreSQL the take is part of
    the writing statement: one round trip and one commit for both.
    """
    if not drafts:
        return True
    if any(x.ordering_key for d in drafts for x in d.deliveries):
        # Laned deliveries are placed under their lanes' locks, which the
        # write must commit with (deliveries/lanes.py): a transaction, and
        # two statements more, for the publishes that name an ordering key
        # for an ordered endpoint only.
        with transaction.atomic():
            deliveries_enqueue([x for d in drafts for x in d.deliveries])
            return _write(drafts, only_new_key, unchanged or {}, rate)
    return _write(drafts, only_new_key, unchanged or {}, rate)


def _write(
    drafts: Sequence[Draft],
    only_new_key: bool,
    unchanged: Mapping[int, str],
    rate: Take | None,
) -> bool:
    if dbfeatures.batch_statements() and citus.on():
        return _write_by_shard(drafts, only_new_key, unchanged, rate)
    if dbfeatures.batch_statements():
        return _write_postgres(drafts, only_new_key, unchanged, rate)
    if rate is not None:
        publish_rate_take(costs=rate.costs, now=rate.now)
    return _write_orm(drafts, idempotent=only_new_key)


def notify_dispatchers() -> None:
    """Wake idle dispatchers (on commit), once per transaction."""
    if dbfeatures.shared_by_many_processes() and not _notified():
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")
        _mark_notified()


def _write_postgres(
    drafts: Sequence[Draft],
    only_new_key: bool,
    unchanged: Mapping[int, str],
    rate: Take | None,
) -> bool:
    events = [d.event for d in drafts]
    deliveries = [x for d in drafts for x in d.deliveries]
    ctes, answers, all_params = [], ["(SELECT count(*) FROM ev)"], []
    conditions: list[tuple[str, list]] = []  # on the events (and so deliveries)
    if unchanged:
        sql, params = guard_sql(unchanged)
        ctes.append(f"fresh AS (SELECT {sql} AS ok)")
        all_params += params
        conditions.append(("(SELECT ok FROM fresh)", []))
        answers.append("(SELECT ok FROM fresh)")
    if rate is not None:
        # Taken only if the audiences hold (else nothing is taken, and the
        # caller fans out again and comes back here); written only if taken.
        guard = "(SELECT ok FROM fresh)" if unchanged else "TRUE"
        ctes.append(take_ctes(guard=guard))
        all_params += take_params(rate.costs, rate.now)
        conditions.append((GRANTED_SQL, []))
        answers.append(VERDICT_SQL)
    if only_new_key:
        conditions.append(
            (
                "NOT EXISTS (SELECT 1 FROM deliveries_event o "
                "WHERE o.idempotency_scope = %s AND o.idempotency_key = %s)",
                [events[0].idempotency_scope, events[0].idempotency_key],
            )
        )
    # The JSON text made once for validation is what is stored (as jsonb).
    sql, params = rowsql.insert_rows(
        events, prepared={"data": [d.data_json for d in drafts]}
    )
    if conditions:
        sql += " WHERE " + " AND ".join(condition for condition, _ in conditions)
        params += [param for _, more in conditions for param in more]
    ctes.append(f"ev AS ({sql} RETURNING id)")
    all_params += params
    notify = bool(deliveries) and not _notified()
    if deliveries:
        sql, params = rowsql.insert_rows(deliveries, by_row=_BY_EVENT)
        if conditions:  # no deliveries for an event that was not written
            sql += " WHERE u.event_id IN (SELECT id FROM ev)"
        ctes.append(f"dl AS ({sql} RETURNING 1)")
        all_params += params
    if notify:
        # NULL when no delivery was written: then nobody needs waking.
        answers.append(
            f"(SELECT pg_notify('{NOTIFY_CHANNEL}', '')::text FROM dl LIMIT 1)"
        )
    with _bound_on_server(), connection.cursor() as cursor:
        cursor.execute(
            f"WITH {', '.join(ctes)} SELECT {', '.join(answers)}", all_params
        )
        row = cursor.fetchone()
    if unchanged and not row[1]:
        raise AudienceChanged(sorted(unchanged))
    if rate is not None:
        take_judge(rate.costs, row[2 if unchanged else 1], rate.now)
    if notify and row[-1] is not None:
        _mark_notified()
    return row[0] == len(events)


def _write_by_shard(
    drafts: Sequence[Draft],
    only_new_key: bool,
    unchanged: Mapping[int, str],
    rate: Take | None,
) -> bool:
    """drafts_write on Citus: one statement per merchant, so each writes an
    event and its deliveries on that merchant's shard (a batch of several
    merchants is one transaction over their shards, all or none).

    The idempotency key is looked up first, in its own statement: under a
    platform key its scope spans merchants, so the lookup reads every shard,
    which Citus will not do inside a statement that writes one. The caller's
    lock on the key is already held, so this snapshot is younger than it,
    as the writing statement's is on one PostgreSQL."""
    if only_new_key:
        event = drafts[0].event
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM deliveries_event o "
                "WHERE o.idempotency_scope = %s AND o.idempotency_key = %s)",
                [event.idempotency_scope, event.idempotency_key],
            )
            if cursor.fetchone()[0]:
                return False
    by_merchant: dict[int, list[Draft]] = {}
    for draft in drafts:
        by_merchant.setdefault(draft.event.merchant_id, []).append(draft)
    with transaction.atomic():
        if rate is not None:
            # Its own statement here, in the same transaction as the writes:
            # a stale audience (AudienceChanged) rolls the take back with
            # them, so drafts_publish's retry takes once, as elsewhere.
            publish_rate_take(costs=rate.costs, now=rate.now)
        for merchant_id, group in by_merchant.items():
            guard = (
                {merchant_id: unchanged[merchant_id]}
                if merchant_id in unchanged
                else {}
            )
            _write_postgres(group, False, guard, None)
    return True


# Runs of one statement text on a session before psycopg prepares it.
PREPARE_THRESHOLD = 2


@contextmanager
def _bound_on_server() -> Iterator[None]:
    """The writing statement binds its parameters on the server, and once its
    text has repeated on the session it runs as a prepared statement.

    Django's cursors bind on the client: PostgreSQL gets literal SQL, which
    it parses and plans anew every time, about a millisecond for this
    statement over two partitioned tables (issue 21), and psycopg quotes
    every value into the text. The text here depends only on which columns
    vary between the rows (rowsql.insert_rows), not on their number, so a
    process sees a handful of texts and psycopg's cache of 100 holds them.
    Off with DB_PREPARED_STATEMENTS=false (a pooler that cannot keep
    prepared statements); a dispatcher's session keeps its own threshold.
    """
    if not settings.DB_PREPARED_STATEMENTS or citus.on():  # not tried on Citus
        yield
        return
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.ensure_connection()
    raw = connection.connection
    cursor_factory, threshold = raw.cursor_factory, raw.prepare_threshold
    raw.cursor_factory = ServerBindingCursor
    if threshold is None:  # Django's default: nothing is prepared
        raw.prepare_threshold = PREPARE_THRESHOLD
    try:
        yield
    finally:
        raw.cursor_factory, raw.prepare_threshold = cursor_factory, threshold


def _write_orm(drafts: Sequence[Draft], *, idempotent: bool) -> bool:
    # SQLite (development): it serialises writers, so a concurrent request
    # with the same key waits and then finds the first one's event.
    with transaction.atomic():
        try:
            with transaction.atomic():
                Event.objects.bulk_create([d.event for d in drafts])
        except IntegrityError:
            if idempotent:
                return False
            raise
        Delivery.objects.bulk_create([x for d in drafts for x in d.deliveries])
    return True


def _woken() -> None:
    """Marks a transaction whose NOTIFY is sent; running it on commit does nothing."""


def _notified() -> bool:
    # Outside a transaction each statement is its own. Inside one, Django
    # keeps on-commit callbacks until the commit and drops those of a rolled
    # back savepoint, exactly as PostgreSQL drops that savepoint's NOTIFY.
    if not connection.in_atomic_block:
        return False
    return any(func is _woken for _, func, _ in connection.run_on_commit)


def _mark_notified() -> None:
    if connection.in_atomic_block:
        transaction.on_commit(_woken)
