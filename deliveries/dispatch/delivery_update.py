"""A flush's delivery rows: the columns each verdict writes, and the one
fenced UPDATE that writes them (outcomes.py calls it inside its transaction).

Fenced: a row changes only while this worker still holds the lease it was
claimed with, so a worker whose lease was taken over cannot overwrite the
new owner.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection
from django.db.models import F

from deliveries import retry
from deliveries.dispatch import backend, prepared
from deliveries.dispatch.transport import SendResult
from deliveries.models import Delivery, ErrorKind
from deliveries.publish.sanitize import storable_text
from deliveries.retry import is_success
from relayproject.lib import citus

if TYPE_CHECKING:
    from deliveries.dispatch.outcomes import Sent


_COLUMNS = (
    ("id", "text"),
    ("lease_until", "timestamptz"),
    ("attempt_count", "integer"),
    ("last_attempt_at", "timestamptz"),
    ("last_status_code", "integer"),
    ("last_error", "text"),
    ("last_response_ms", "double precision"),
    ("status", "text"),
    ("succeeded_at", "timestamptz"),
    ("dead_at", "timestamptz"),
    ("next_attempt_at", "timestamptz"),
    ("budget_spared", "integer"),
)


def deliveries_update(
    items: list[tuple[Sent, retry.Verdict]],
    *,
    worker_id: str,
    now: datetime,
    rand: random.Random,
) -> set[str]:
    """One fenced UPDATE ... FROM unnest(...) for the whole flush (on Citus, one
    per merchant, each on its shard); returns ids updated."""
    if not backend.binds_arrays():
        return {
            item.delivery_id
            for item, verdict in items
            if _update_delivery(item, verdict, worker_id=worker_id, now=now, rand=rand)
        }
    # A statement that names no merchant runs on every shard of a Citus
    # cluster, and Citus serialises it with every other write of the table.
    groups: dict[int | None, list] = {}
    pinned = citus.on()
    for item, verdict in items:
        key = item.merchant_id if pinned else None
        groups.setdefault(key, []).append((item, verdict))
    updated: set[str] = set()
    with prepared.statements(), connection.cursor() as cursor:
        # Binary arrays where the session binds on the server: psycopg dumps
        # them without quoting each element (attempt_insert.py, why).
        binary = prepared.binds_on_server(cursor)
        for merchant_id, group in groups.items():
            columns = _columns(group, now=now, rand=rand)
            if merchant_id is None:
                sql = _UPDATE_SQL_BINARY if binary else _UPDATE_SQL
                cursor.execute(sql, [*columns, worker_id])
            else:
                sql = _UPDATE_SQL_PINNED_BINARY if binary else _UPDATE_SQL_PINNED
                cursor.execute(sql, [*columns, worker_id, merchant_id])
            updated |= {r[0] for r in cursor.fetchall()}
    return updated


def _columns(items: list[tuple[Sent, retry.Verdict]], *, now, rand) -> list[list]:
    columns: list[list] = [[] for _ in _COLUMNS]
    for item, verdict in items:
        f = _delivery_fields(item, verdict, now=now, rand=rand)
        row = [
            item.delivery_id,
            item.lease_until,
            f["attempt_count"],
            f["last_attempt_at"],
            f["last_status_code"],
            f["last_error"],
            f["last_response_ms"],
            f["status"],
            f.get("succeeded_at"),
            f.get("dead_at"),
            f.get("next_attempt_at"),
            1 if spends_no_attempt(item.result) else 0,
        ]
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return columns


# One array per column (unnest), not VALUES rows: the statement's text is the
# same for every flush, so a dispatcher's session prepares it once.
_UPDATE_SQL = (
    f"UPDATE {Delivery._meta.db_table} AS d SET attempt_count = v.attempt_count, "
    "last_attempt_at = v.last_attempt_at, last_status_code = v.last_status_code, "
    "last_error = v.last_error, last_response_ms = v.last_response_ms, "
    "status = v.status, claimed_by = '', claimed_until = NULL, "
    "succeeded_at = COALESCE(v.succeeded_at, d.succeeded_at), "
    "dead_at = COALESCE(v.dead_at, d.dead_at), "
    "next_attempt_at = COALESCE(v.next_attempt_at, d.next_attempt_at), "
    "budget_start = d.budget_start + v.budget_spared "
    "FROM unnest("
    + ", ".join(f"%s::{t}[]" for _, t in _COLUMNS)
    + f") AS v({', '.join(n for n, _ in _COLUMNS)}) "
    "WHERE d.id = v.id AND d.status = 'delivering' AND d.claimed_by = %s "
    "AND d.claimed_until = v.lease_until RETURNING d.id"
)
# Citus: the same, on one merchant's shard.
_UPDATE_SQL_PINNED = _UPDATE_SQL.replace(
    " RETURNING d.id", " AND d.merchant_id = %s RETURNING d.id"
)
_UPDATE_SQL_BINARY = _UPDATE_SQL.replace("%s::", "%b::")
_UPDATE_SQL_PINNED_BINARY = _UPDATE_SQL_PINNED.replace("%s::", "%b::")


def _delivery_fields(
    item: Sent, verdict: retry.Verdict, *, now: datetime, rand: random.Random
) -> dict:
    result = item.result
    fields: dict = {
        "attempt_count": item.attempt_count + 1,
        "last_attempt_at": item.started_at,
        "last_status_code": result.status_code,
        "last_error": error_text(result),
        "last_response_ms": result.duration_ms,
        "claimed_by": "",
        "claimed_until": None,
    }
    if verdict == retry.Verdict.SUCCEEDED:
        fields.update(status=Delivery.Status.SUCCEEDED, succeeded_at=now)
    elif verdict == retry.Verdict.RETRY:
        # An attempt the egress proxy failed backs off by its number, as the
        # budget it did not spend would not grow: a proxy that stays down is
        # asked less and less often, up to the longest delay.
        failed = item.attempt_count + 1
        if not spends_no_attempt(result):
            failed -= item.budget_start
        delay = retry.next_delay(
            failed_attempts=failed,
            status_code=result.status_code,
            retry_after_header=result.retry_after,
            base=settings.RETRY_BASE_SECONDS,
            max_delay=settings.RETRY_MAX_DELAY_SECONDS,
            rand=rand,
            now=now,
            schedule=item.retry_schedule,
        )
        fields.update(
            status=Delivery.Status.PENDING,
            next_attempt_at=now + timedelta(seconds=delay),
        )
    else:
        fields.update(status=Delivery.Status.DEAD, dead_at=now)
    return fields


def _update_delivery(
    item: Sent,
    verdict: retry.Verdict,
    *,
    worker_id: str,
    now: datetime,
    rand: random.Random,
) -> bool:
    fields = _delivery_fields(item, verdict, now=now, rand=rand)
    if spends_no_attempt(item.result):
        fields["budget_start"] = F("budget_start") + 1
    return bool(
        Delivery.objects.filter(
            pk=item.delivery_id,
            status=Delivery.Status.DELIVERING,
            claimed_by=worker_id,
            claimed_until=item.lease_until,
        ).update(**fields)
    )


def spends_no_attempt(result: SendResult) -> bool:
    """An attempt the egress proxy failed is recorded, numbered and retried,
    but the receiver was never reached: its budget_start moves up with its
    attempt_count, so the attempts left (max - (count - start)) stay as
    they were, the way a replay's fresh budget is kept."""
    return result.error_kind == ErrorKind.PROXY_ERROR


def error_text(result: SendResult) -> str:
    if result.error_kind:
        return storable_text(result.error_kind, limit=100)
    if result.status_code is not None and not is_success(result.status_code):
        return f"http {result.status_code}"
    return ""
