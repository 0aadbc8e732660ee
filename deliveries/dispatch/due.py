"""What a claim reads before it locks rows: the endpoints with due work and
room, merchants in turn, and the live claims that decide the room.

claiming.py runs the first before its claim transaction (a lock-free read,
checked again under the locks) and the live claims inside it, under the
merchants' locks. On PostgreSQL they are claim_sql.DUE and load_sql.LIVE, on
SQLite their ORM forms here.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from deliveries.dispatch import backend, claim_sql, load_sql
from deliveries.dispatch.prepared import AnyOf  # noqa: F401 - registers field__any
from deliveries.models import Delivery
from deliveries.pull.leasing import PULLED_BY
from endpoints.brokers import PULL
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib import citus

DUE_STATUSES = Delivery.Status.UNFINISHED


class Due(NamedTuple):
    """An endpoint with due work and room: its merchant and their caps."""

    merchant_id: int
    cap: int  # the endpoint's max_in_flight
    max_attempts: int | None  # the endpoint's, else its merchant's default
    merchant_cap: int  # the merchant's max_in_flight


class Live(NamedTuple):
    """Delivering rows with a live lease, per endpoint and per merchant."""

    endpoints: dict[str, int]
    merchants: dict[int, int]


def rooms(due: dict[str, Due], merchants: list[int], live: Live) -> list[tuple]:
    """(merchant, room, [(endpoint, room), ...]) in the order they were listed."""
    endpoints: dict[int, list[tuple[str, int]]] = {m: [] for m in merchants}
    caps: dict[int, int] = {}
    for endpoint_id, d in due.items():
        endpoints[d.merchant_id].append(
            (endpoint_id, d.cap - live.endpoints.get(endpoint_id, 0))
        )
        caps[d.merchant_id] = d.merchant_cap
    return [
        (m, caps[m] - live.merchants.get(m, 0), endpoints[m])
        for m in merchants
        if endpoints[m]
    ]


def endpoints_with_due_work(*, now: datetime, limit: int) -> dict[str, Due]:
    """Up to `limit` endpoints that could take a row now, merchants in turn
    (each merchant's oldest-due endpoint, then each one's next, ...), oldest due
    first within a turn.

    Per endpoint, one probe of delivery_endpoint_due_idx finds its oldest due
    row, so the cost follows the number of endpoints, not the rows behind
    them; live claims are counted once for all endpoints. The live counts here
    only skip full endpoints and merchants; they are counted again under the
    merchant's lock before anything is taken.
    """
    if backend.shared_by_dispatchers():
        with connection.cursor() as cursor:
            cursor.execute(
                claim_sql.DUE_SHARDED if citus.on() else claim_sql.DUE,
                {
                    "now": now,
                    "cap": settings.ENDPOINT_MAX_IN_FLIGHT,
                    "merchant_cap": settings.MERCHANT_MAX_IN_FLIGHT,
                    "closed": EndpointHealth.State.CLOSED,
                    "limit": limit,
                },
            )
            return {pk: Due(*rest) for pk, *rest in cursor.fetchall()}
    due_rows = Delivery.objects.filter(
        endpoint_id=OuterRef("pk"),
        # Due pending rows and expired leases alike: while delivering,
        # next_attempt_at is the lease end (see Delivery.next_attempt_at).
        status__in=DUE_STATUSES,
        next_attempt_at__lte=now,
    ).order_by("next_attempt_at")
    live = (
        Delivery.objects.filter(
            endpoint_id=OuterRef("pk"),
            status=Delivery.Status.DELIVERING,
            claimed_until__gt=now,
        )
        .exclude(claimed_by=PULLED_BY)
        .order_by()
        .values("endpoint_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    rows = (
        # Disabled endpoints, switched-off merchants, open breakers and
        # endpoints awaiting verification hold their rows back without
        # spending attempts. Pull endpoints' rows are leased by their consumers.
        Endpoint.objects.filter(
            is_active=True, merchant__is_active=True, awaiting_verification=False
        )
        .exclude(kind=PULL)
        .filter(
            Q(health__breaker_state=EndpointHealth.State.CLOSED)
            | Q(health__isnull=True)  # made outside the services
        )
        .annotate(
            oldest_due=Subquery(due_rows.values("next_attempt_at")[:1]),
            cap=Coalesce("max_in_flight", settings.ENDPOINT_MAX_IN_FLIGHT),
            merchant_cap=Coalesce(
                "merchant__max_in_flight", settings.MERCHANT_MAX_IN_FLIGHT
            ),
            live=Coalesce(Subquery(live), 0),
            # The endpoint's, else its merchant's default (as claim_sql.DUE).
            attempts_in_force=Coalesce("max_attempts", "merchant__max_attempts"),
        )
        .filter(oldest_due__isnull=False, live__lt=F("cap"))
        .order_by("oldest_due", "pk")
        .values_list("pk", "merchant_id", "cap", "attempts_in_force", "merchant_cap")
    )
    # SQLite (one dispatcher, a demo's worth of endpoints): the turns in Python.
    merchant_live = live_claims(None, now=now).merchants
    turns: dict[int, int] = {}
    listed = []
    for n, (pk, merchant_id, cap, most, merchant_cap) in enumerate(rows):
        turn = turns[merchant_id] = turns.get(merchant_id, 0) + 1
        if turn <= merchant_cap - merchant_live.get(merchant_id, 0):
            listed.append((turn, n, pk, Due(merchant_id, cap, most, merchant_cap)))
    return {pk: d for _, _, pk, d in sorted(listed)[:limit]}


def live_claims(merchant_ids: list[int] | None, *, now: datetime) -> Live:
    """Delivering rows with a live lease (sends in flight or queued) of these
    merchants' endpoints (None: every merchant's), per endpoint and merchant.
    Every endpoint of the merchant counts, not only those with due work."""
    if merchant_ids is not None and not merchant_ids:
        return Live({}, {})
    if merchant_ids is not None and backend.runs_written_sql():
        with connection.cursor() as cursor:
            cursor.execute(load_sql.LIVE, {"now": now, "merchants": merchant_ids})
            return live_of(cursor.fetchall())
    return live_of(_live_counts(merchant_ids, now=now))


def live_of(counts) -> Live:
    """(endpoint, merchant, live claims) rows, as Live."""
    live = Live({}, {})
    for endpoint_id, merchant_id, n in counts:
        live.endpoints[endpoint_id] = n
        live.merchants[merchant_id] = live.merchants.get(merchant_id, 0) + n
    return live


def _live_counts(merchant_ids: list[int] | None, *, now: datetime):
    """(endpoint, merchant, live claims): load_sql.LIVE's ORM form (a pull
    consumer's lease is no send: it takes none of the merchant's room)."""
    rows = Delivery.objects.filter(
        status=Delivery.Status.DELIVERING, claimed_until__gt=now
    ).exclude(claimed_by=PULLED_BY)
    if merchant_ids is not None:
        # The delivery's own merchant_id (its endpoint's): no join, and on
        # Citus a read of those merchants' shards alone.
        rows = rows.filter(merchant_id__any=merchant_ids)
    return (
        rows.order_by()
        .values("endpoint_id", "merchant_id")
        .annotate(n=Count("pk"))
        .values_list("endpoint_id", "merchant_id", "n")
    )
