"""API keys: made, revoked, authenticated, and the merchant scope they carry.

Only a hash of a key is stored; the full key is shown once. Every API request
authenticates, and reading the key row each time was a quarter of a publish's
cost, so each process trusts a live key it read for API_KEY_CACHE_SECONDS
(default 1): a key revoked anywhere stops working in every process within
that time, and at once in the process that revoked it. Only live keys are
cached: a new key works at once and a wrong one is always looked up. The
cached ApiKey (with its merchant) is shared by the requests of a process and
must be treated as read-only.

A scoped key must not learn that another merchant's objects exist, so every
lookup goes through `visible_*`, which answers 404 for both "absent" and
"someone else's".

A merchant switched off by staff (endpoints/switched_off.py) acts through no
key: every call of its own keys is a 403 (at once where `visible_*` reads the
merchant, else within API_KEY_CACHE_SECONDS, as a revocation), and a platform
key may read it but not write for it.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from ninja.security import HttpBearer

from endpoints.models import ApiKey, Endpoint, Merchant
from endpoints.switched_off import MerchantSwitchedOff, merchant_check_on
from relayproject.lib import dbfeatures, rowsql
from relayproject.lib.clock import utcnow
from relayproject.lib.ttlcache import TtlCache

PLATFORM_SCOPE = "platform"
MAX_CACHED_KEYS = 10_000  # far more keys than one deployment uses; bounds memory

# key hash -> ApiKey; seconds on the wall clock, as `now` is passed in.
live_keys: TtlCache[str, ApiKey] = TtlCache(
    ttl=lambda: settings.API_KEY_CACHE_SECONDS, max_entries=MAX_CACHED_KEYS
)

# Methods that change nothing: a platform key may use them on a switched-off merchant.
READS = frozenset({"GET", "HEAD", "OPTIONS"})

API_KEY_PREFIX = "rk_"
API_KEY_TOUCH_SECONDS = 60  # last_used_at is a hint, not an audit log


def _api_key_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def apikey_create(
    *, name: str, merchant: Merchant | None = None, owner_links: bool = True
) -> tuple[ApiKey, str]:
    """A new key; the full key is returned once and only its hash is stored.

    owner_links: a scoped key may make owner portal links (the admin passes
    False unless a superuser makes the key).
    """
    prefix = f"{API_KEY_PREFIX}{secrets.token_hex(4)}"
    full_key = f"{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey(
        name=name,
        merchant=merchant,
        prefix=prefix,
        key_hash=_api_key_hash(full_key),
        owner_links=owner_links,
    )
    key.full_clean()
    key.save()
    return key, full_key


def apikey_authenticate(raw: str, *, now: datetime | None = None) -> ApiKey | None:
    """The live key for raw, or None; records use at most once a minute.

    Served from the process's key cache (`live_keys`) when it was read less
    than API_KEY_CACHE_SECONDS ago; else one round trip reads it.
    """
    if not raw.startswith(API_KEY_PREFIX) or len(raw) > 200:
        return None
    now = now or utcnow()
    key_hash = _api_key_hash(raw)
    key = live_keys.get(key_hash, now=now.timestamp())
    if key is None:
        key = _apikey_read(key_hash, now=now)
        if key is not None:
            live_keys.put(key_hash, key, now=now.timestamp())
    return key


def _apikey_read(key_hash: str, *, now: datetime) -> ApiKey | None:
    """The live key with its merchant, marking it used if it was not lately."""
    stale = now - timedelta(seconds=API_KEY_TOUCH_SECONDS)
    if not dbfeatures.batch_statements():
        key = (
            ApiKey.objects.select_related("merchant")
            .filter(key_hash=key_hash, revoked_at__isnull=True)
            .first()
        )
        if key is not None and (key.last_used_at is None or key.last_used_at < stale):
            # Conditional, so a burst of requests writes the row once.
            ApiKey.objects.filter(pk=key.pk).filter(
                Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)
            ).update(last_used_at=now)
            key.last_used_at = now
        return key
    # The same in one statement: read, conditionally touch, join the merchant.
    sql = (
        f"WITH k AS (SELECT {rowsql.columns(ApiKey, 'a')} FROM endpoints_apikey a "
        "WHERE a.key_hash = %s AND a.revoked_at IS NULL), "
        "t AS (UPDATE endpoints_apikey a SET last_used_at = %s FROM k "
        "WHERE a.id = k.id AND (a.last_used_at IS NULL OR a.last_used_at < %s) "
        "RETURNING a.id) "
        f"SELECT {rowsql.columns(ApiKey, 'k')}, {rowsql.columns(Merchant, 'm')}, "
        "(SELECT count(*) FROM t) FROM k "
        "LEFT JOIN endpoints_merchant m ON m.id = k.merchant_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [key_hash, now, stale])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(ApiKey._meta.concrete_fields)
    key = rowsql.from_row(ApiKey, row[:width])
    if key.merchant_id is not None:
        key.merchant = rowsql.from_row(Merchant, row[width:-1])
    if row[-1]:
        key.last_used_at = now
    return key


def apikey_revoke(*, key: ApiKey, now: datetime | None = None) -> None:
    """Revoked at once in this process, within API_KEY_CACHE_SECONDS in others."""
    if key.revoked_at is None:
        key.revoked_at = now or utcnow()
        key.save(update_fields=["revoked_at"])
    live_keys.forget(key.key_hash)


class ApiKeyAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        key = apikey_authenticate(token)
        if key is not None and key.merchant_id is not None:
            # Raised here, every operation answers it (relayproject/api.py: 403).
            merchant_check_on(key.merchant)
        return key


def api_key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined]


def idempotency_scope(request: HttpRequest) -> str:
    """The scope: "platform", or "merchant:<pk>"; never a slug, which a merchant
    may choose (slug "platform" would share the platform's keys) or rename."""
    key = api_key(request)
    return PLATFORM_SCOPE if key.is_platform else merchant_scope(key.merchant_id)


def merchant_scope(merchant_id: int) -> str:
    return f"merchant:{merchant_id}"


def scoped(request: HttpRequest, queryset: QuerySet, merchant_field: str) -> QuerySet:
    """queryset narrowed to the key's merchant (platform keys see everything)."""
    key = api_key(request)
    if key.is_platform:
        return queryset
    return queryset.filter(**{merchant_field: key.merchant_id})


def visible_merchant(request: HttpRequest, slug: str) -> Merchant:
    merchant = scoped(request, Merchant.objects.filter(slug=slug), "pk").first()
    if merchant is None:
        raise Http404(f"No merchant {slug!r}.")
    merchant_acted_for(request, merchant)
    return merchant


def merchant_acted_for(request: HttpRequest, merchant: Merchant) -> None:
    """Raise MerchantSwitchedOff if the merchant (as just read from the
    database, not the key's cached one) is switched off, unless a platform
    key only reads."""
    if merchant.is_active:
        return
    if api_key(request).is_platform and request.method in READS:
        return
    raise MerchantSwitchedOff(merchant.slug)


def visible_endpoint(request: HttpRequest, slug: str, endpoint_id: str) -> Endpoint:
    merchant = visible_merchant(request, slug)
    # By its key alone: the model's ordering (merchant, then created_at)
    # would join and sort for the one row the key names.
    endpoint = (
        Endpoint.objects.select_related("health")
        .filter(merchant=merchant, pk=endpoint_id)
        .order_by()
        .first()
    )
    if endpoint is None:
        raise Http404(f"No endpoint {endpoint_id!r} for merchant {slug!r}.")
    endpoint.merchant = merchant  # as just read, switched-off check and all
    return endpoint
