"""Reads for merchants and endpoints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import Q, QuerySet

from endpoints.models import Endpoint, EndpointSecret, Merchant
from relayproject import rowsql


@dataclass
class Audience:
    """A merchant and its active endpoints: whom its events may go to."""

    merchant: Merchant
    endpoints: list[Endpoint] = field(default_factory=list)


_SLUG_AT = [f.attname for f in Merchant._meta.concrete_fields].index("slug")


def audiences(
    *, slugs: Iterable[str] = (), merchant_ids: Iterable[int] = ()
) -> dict[str, Audience]:
    """Merchants by slug (named by slug or id) with their active endpoints.

    One query, so a publish learns both in one round trip; an unknown merchant
    is simply absent. Endpoints are whole rows, so whatever a fan-out rule
    needs (subscriptions, a payload filter) is there.
    """
    found, _ = _audiences(list(slugs), list(merchant_ids), lock="")
    return found


def audience_locked(*, slug: str, lock: str) -> tuple[Audience | None, bool]:
    """audiences() of one slug, and in the same round trip (PostgreSQL, in a
    transaction) pg_try_advisory_xact_lock(hashtext(lock)): whether it was got.

    The lock is only tried when the merchant exists.
    """
    found, got = _audiences([slug], [], lock=lock)
    return found.get(slug), got


def _audiences(
    slugs: list[str], merchant_ids: list[int], *, lock: str
) -> tuple[dict[str, Audience], bool]:
    sql = (
        f"SELECT {rowsql.columns(Merchant, 'm')}, {rowsql.columns(Endpoint, 'e')} "
        "FROM endpoints_merchant m LEFT JOIN endpoints_endpoint e "
        "ON e.merchant_id = m.id AND e.is_active "
        f"WHERE m.slug IN ({rowsql.placeholders(slugs)}) "
        f"OR m.id IN ({rowsql.placeholders(merchant_ids)}) "
        "ORDER BY m.id, e.id"
    )
    params: list = [*slugs, *merchant_ids]
    if lock:
        # A volatile CTE runs once, when the first row asks for it.
        sql = (
            "WITH lk AS (SELECT pg_try_advisory_xact_lock(hashtext(%s)) AS got) "
            + sql.replace("SELECT ", "SELECT (SELECT got FROM lk), ", 1)
        )
        params.insert(0, lock)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    got = bool(rows and rows[0][0]) if lock else False
    skip = 1 if lock else 0
    width = len(Merchant._meta.concrete_fields)
    found: dict[str, Audience] = {}
    for row in rows:
        row = row[skip:]
        slug = row[_SLUG_AT]
        if slug not in found:
            found[slug] = Audience(rowsql.from_row(Merchant, row[:width]))
        if row[width] is not None:
            found[slug].endpoints.append(rowsql.from_row(Endpoint, row[width:]))
    return found, got


def live_secrets(*, endpoint_ids: Iterable[str], now: datetime) -> dict[str, list[str]]:
    """Secrets that still sign, newest first, for each endpoint."""
    rows = (
        EndpointSecret.objects.filter(endpoint_id__in=list(endpoint_ids))
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("endpoint_id", "-created_at", "-id")
        .values_list("endpoint_id", "secret")
    )
    secrets: dict[str, list[str]] = defaultdict(list)
    for endpoint_id, secret in rows:
        secrets[endpoint_id].append(secret)
    return dict(secrets)


def endpoints_of_merchant(*, merchant_id: int) -> QuerySet[Endpoint]:
    return Endpoint.objects.filter(merchant_id=merchant_id).select_related("health")


def breakers_not_closed(*, endpoint_ids: Iterable[str]) -> dict[str, datetime | None]:
    """Endpoints among these whose breaker is open or half-open, with the next probe time."""
    from endpoints.models import EndpointHealth

    return dict(
        EndpointHealth.objects.filter(pk__in=list(endpoint_ids))
        .exclude(breaker_state=EndpointHealth.State.CLOSED)
        .values_list("pk", "next_probe_at")
    )
