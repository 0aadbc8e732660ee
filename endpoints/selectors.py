"""Reads for merchants and endpoints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.db import connection
from django.db.models import Count, Q, QuerySet

from endpoints import signing_keys
from endpoints.models import Endpoint, EndpointSecret, Membership, Merchant
from relayproject.lib import dbfeatures


def live_secrets(
    *, endpoint_ids: Iterable[str], now: datetime, merchant_id: int | None = None
) -> dict[str, list[str]]:
    """Secrets that still sign, newest first, for each endpoint (all of one
    merchant when given: on Citus, the statement runs on its shard)."""
    secrets: dict[str, list[str]] = defaultdict(list)
    endpoint_ids = list(endpoint_ids)
    if not endpoint_ids:
        return {}
    if merchant_id is None and dbfeatures.batch_statements():
        # Every claim asks this: the text written once, not compiled by the ORM
        # each time (the dispatcher's load_sql.py says why). On Citus too: the
        # same statement as the ORM's, over every shard.
        with connection.cursor() as cursor:
            cursor.execute(*live_secrets_statement(endpoint_ids=endpoint_ids, now=now))
            return live_secrets_read(cursor.fetchall())
    merchant = {} if merchant_id is None else {"merchant_id": merchant_id}
    rows = (
        EndpointSecret.objects.filter(endpoint_id__in=list(endpoint_ids), **merchant)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("endpoint_id", "-created_at", "-id")
        .values_list("endpoint_id", "secret")
    )
    for endpoint_id, secret in rows:
        secrets[endpoint_id].append(secret)
    return dict(secrets)


def live_secrets_statement(
    *, endpoint_ids: list[str], now: datetime
) -> tuple[str, dict]:
    """live_secrets' statement on PostgreSQL, for a caller that sends it with
    others (the dispatcher's claim): its rows go to live_secrets_read."""
    return _SECRETS_SQL, {"endpoints": endpoint_ids, "now": now}


def live_secrets_read(rows: Iterable[tuple]) -> dict[str, list[str]]:
    """live_secrets_statement's rows as live_secrets returns them (decrypted)."""
    field = EndpointSecret._meta.get_field("secret")
    secrets: dict[str, list[str]] = defaultdict(list)
    for endpoint_id, secret in rows:
        secrets[endpoint_id].append(field.from_db_value(secret, None, connection))
    return dict(secrets)


_SECRETS_SQL = f"""
SELECT s.endpoint_id, s.secret
FROM {EndpointSecret._meta.db_table} AS s
WHERE s.endpoint_id = ANY(%(endpoints)s)
AND (s.expires_at IS NULL OR s.expires_at > %(now)s)
ORDER BY s.endpoint_id, s.created_at DESC, s.id DESC
"""


def endpoints_of_merchant(*, merchant_id: int) -> QuerySet[Endpoint]:
    return Endpoint.objects.filter(merchant_id=merchant_id).select_related("health")


def breakers_not_closed(
    *, endpoint_ids: Iterable[str], merchant_id: int | None = None
) -> dict[str, datetime | None]:
    """Endpoints among these whose breaker is open or half-open, with the next
    probe time (all of one merchant when given: on Citus, one shard)."""
    from endpoints.models import EndpointHealth

    if merchant_id is None and dbfeatures.batch_statements():
        # A busy dispatcher asks this 20 times a second: written once, as
        # live_secrets is.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT h.endpoint_id, h.next_probe_at "
                f"FROM {EndpointHealth._meta.db_table} AS h "
                "WHERE h.endpoint_id = ANY(%(ids)s) AND h.breaker_state <> %(closed)s",
                {"ids": list(endpoint_ids), "closed": EndpointHealth.State.CLOSED},
            )
            return dict(cursor.fetchall())
    merchant = {} if merchant_id is None else {"merchant_id": merchant_id}
    return dict(
        EndpointHealth.objects.filter(pk__in=list(endpoint_ids), **merchant)
        .exclude(breaker_state=EndpointHealth.State.CLOSED)
        .values_list("pk", "next_probe_at")
    )


def memberships_of(*, user) -> list[Membership]:
    """The active merchants a portal user belongs to, for the merchant switcher."""
    return list(
        Membership.objects.filter(user=user, merchant__is_active=True)
        .select_related("merchant")
        .order_by("merchant__name", "merchant__slug")
    )


def secrets_of_endpoint(*, endpoint: Endpoint, now: datetime) -> list[EndpointSecret]:
    """One endpoint's secrets that still sign, newest first (two during a rotation)."""
    return list(
        EndpointSecret.objects.filter(endpoint=endpoint)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("-created_at", "-id")
    )


def destinations_summary() -> dict[str, object]:
    """Endpoints counted by kind, and how many merchants have their own broker
    host list (relay_status says what broker destinations are open to)."""
    counts = Endpoint.objects.order_by().values_list("kind").annotate(n=Count("id"))
    return {
        "endpoints_by_kind": dict(sorted(counts)),
        "merchants_with_own_broker_hosts": Merchant.objects.filter(
            broker_hosts__isnull=False
        ).count(),
    }


def signing_keys_of(*, slug: str) -> list[dict[str, str]] | None:
    """The public keys of a merchant's endpoints that sign with v1a or both, in
    the order the endpoints were made; None for no such merchant. Only what a
    stranger may read: the key set is published without authentication."""
    merchant_id = Merchant.objects.filter(slug=slug).values_list("pk", flat=True)
    if not (found := list(merchant_id)):
        return None
    rows = (
        Endpoint.objects.filter(
            merchant_id=found[0],
            signing__in=[signing_keys.V1A, signing_keys.BOTH],
        )
        .exclude(signing_public_key="")
        .order_by("created_at", "id")
        .values_list("id", "signing_public_key")
    )
    return [{"endpoint_id": pk, "public_key": key} for pk, key in rows]
