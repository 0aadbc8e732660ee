"""Writes for merchants, endpoints, secrets and endpoint health."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest, Least
from django.db.models.lookups import GreaterThanOrEqual

from endpoints import destinations, quotas, ratelimit
from endpoints.custom_headers import header_errors
from endpoints.filtering import filter_errors
from endpoints.keycache import live_keys
from endpoints.matching import is_valid_subscription
from endpoints.models import (
    ApiKey,
    Endpoint,
    EndpointHealth,
    EndpointSecret,
    Merchant,
)
from endpoints.secrets import generate_secret
from relayproject.lib import rowsql
from relayproject.lib.clock import utcnow

_UNSET = object()
MAX_IN_FLIGHT_LIMIT = 1000  # sends at once to one endpoint, across all dispatchers


def merchant_create(*, slug: str, name: str) -> Merchant:
    merchant = Merchant(slug=slug, name=name)
    merchant.full_clean()
    merchant.save()
    return merchant


def endpoint_url_check(url: str) -> None:
    """Raise ValidationError({"url": reason}) when the destination policy refuses url."""
    try:
        destinations.check_url(
            url, allow_private=settings.RELAY_ALLOW_PRIVATE_DESTINATIONS
        )
    except destinations.DestinationRefused as exc:
        raise ValidationError({"url": [exc.reason]}) from exc


def _clean_fields(
    *,
    url: str | None,
    event_types: Sequence[str] | None,
    max_attempts: int | None,
    rate_limit_per_second: float | None,
    filter: object = None,
    headers: object = None,
    max_in_flight: int | None = None,
    permanent_statuses: object = None,
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if problems := permanent_status_errors(permanent_statuses):
        errors["permanent_statuses"] = problems
    if problems := filter_errors(filter):
        errors["filter"] = problems
    if problems := header_errors(headers):
        errors["headers"] = problems
    if url is not None:
        if len(url) > 2000:
            errors["url"] = ["At most 2000 characters."]
        else:
            try:
                endpoint_url_check(url)
            except ValidationError as exc:
                errors.update(exc.message_dict)
    if event_types is not None:
        bad = [
            t
            for t in event_types
            if not isinstance(t, str) or not is_valid_subscription(t)
        ]
        if bad:
            errors["event_types"] = [
                f"Not an event type or prefix.* pattern: {bad[0]!r}."
            ]
    if max_attempts is not None and not 1 <= max_attempts <= 100:
        errors["max_attempts"] = ["Must be between 1 and 100."]
    if rate_limit_per_second is not None and not 0 < rate_limit_per_second <= 10000:
        errors["rate_limit_per_second"] = ["Must be above 0 and at most 10000."]
    if max_in_flight is not None and not 1 <= max_in_flight <= MAX_IN_FLIGHT_LIMIT:
        errors["max_in_flight"] = [f"Must be between 1 and {MAX_IN_FLIGHT_LIMIT}."]
    return errors


MAX_PERMANENT_STATUSES = 50


def permanent_status_errors(statuses: object) -> list[str]:
    """What is wrong with a permanent_statuses list ([] when nothing; None: unset)."""
    if statuses is None:
        return []
    if not isinstance(statuses, list | tuple):
        return ["A list of HTTP status codes, e.g. [400, 404]."]
    if len(statuses) > MAX_PERMANENT_STATUSES:
        return [f"At most {MAX_PERMANENT_STATUSES} statuses."]
    for status in statuses:
        if isinstance(status, bool) or not isinstance(status, int):
            return [f"Not a status code: {status!r}."]
        if status == 410:
            return ["410 always stops delivery and disables the endpoint."]
        if not 300 <= status <= 599:
            return [f"{status}: only 300-599 can be a failure to stop on."]
    return []


def endpoint_create(
    *,
    merchant: Merchant,
    url: str,
    description: str = "",
    event_types: Sequence[str] = (),
    max_attempts: int | None = None,
    rate_limit_per_second: float | None = None,
    filter: dict | None = None,
    headers: dict[str, str] | None = None,
    max_in_flight: int | None = None,
    permanent_statuses: Sequence[int] = (),
    now: datetime | None = None,
) -> Endpoint:
    """Create an endpoint with its first signing secret and a closed breaker."""
    now = now or utcnow()
    errors = _clean_fields(
        url=url,
        event_types=event_types,
        max_attempts=max_attempts,
        rate_limit_per_second=rate_limit_per_second,
        filter=filter,
        headers=headers,
        max_in_flight=max_in_flight,
        permanent_statuses=list(permanent_statuses),
    )
    if len(description) > 500:
        errors["description"] = ["At most 500 characters."]
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        quotas.endpoint_room_take(merchant)
        endpoint = Endpoint.objects.create(
            merchant=merchant,
            url=url,
            description=description,
            event_types=list(dict.fromkeys(event_types)),
            max_attempts=max_attempts,
            rate_limit_per_second=rate_limit_per_second,
            filter=filter or None,
            headers=headers or {},
            max_in_flight=max_in_flight,
            permanent_statuses=sorted(set(permanent_statuses)),
        )
        EndpointSecret.objects.create(
            endpoint=endpoint, secret=generate_secret(), created_at=now
        )
        EndpointHealth.objects.create(
            endpoint=endpoint,
            failure_threshold=settings.BREAKER_FAILURE_THRESHOLD,
            cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
        )
    return endpoint


def endpoint_update(
    *,
    endpoint: Endpoint,
    url=_UNSET,
    description=_UNSET,
    event_types=_UNSET,
    max_attempts=_UNSET,
    rate_limit_per_second=_UNSET,
    filter=_UNSET,
    headers=_UNSET,
    max_in_flight=_UNSET,
    permanent_statuses=_UNSET,
    is_active=_UNSET,
    by: str = "api",
    now: datetime | None = None,
) -> Endpoint:
    """Change only the fields given; validate them all before writing any."""
    errors = _clean_fields(
        url=None if url is _UNSET else url,
        event_types=None if event_types is _UNSET else event_types,
        max_attempts=None if max_attempts is _UNSET else max_attempts,
        rate_limit_per_second=None
        if rate_limit_per_second is _UNSET
        else rate_limit_per_second,
        filter=None if filter is _UNSET else filter,
        headers=None if headers is _UNSET else headers,
        max_in_flight=None if max_in_flight is _UNSET else max_in_flight,
        permanent_statuses=None
        if permanent_statuses is _UNSET
        else list(permanent_statuses or ()),
    )
    if description is not _UNSET and len(description or "") > 500:
        errors["description"] = ["At most 500 characters."]
    if errors:
        raise ValidationError(errors)
    changes = {
        "url": url,
        "description": description,
        "event_types": list(dict.fromkeys(event_types))
        if event_types is not _UNSET
        else _UNSET,
        "max_attempts": max_attempts,
        "rate_limit_per_second": rate_limit_per_second,
        "filter": (filter or None) if filter is not _UNSET else _UNSET,
        "headers": (headers or {}) if headers is not _UNSET else _UNSET,
        "max_in_flight": max_in_flight,
        "permanent_statuses": sorted(set(permanent_statuses or ()))
        if permanent_statuses is not _UNSET
        else _UNSET,
    }
    for field, value in changes.items():
        if value is not _UNSET:
            setattr(endpoint, field, value)
    with transaction.atomic():
        endpoint.save()
        if is_active is True and not endpoint.is_active:
            endpoint_enable(endpoint=endpoint)
        elif is_active is False and endpoint.is_active:
            endpoint_disable(
                endpoint=endpoint, reason="disabled by user", by=by, now=now
            )
    return endpoint


_DISABLE_FIELDS = [
    "is_active",
    "disabled_reason",
    "disabled_at",
    "disabled_by",
    "updated_at",
]


def endpoint_disable(
    *, endpoint: Endpoint, reason: str, by: str = "", now: datetime | None = None
) -> None:
    """Stop sending; pending deliveries stay pending (held) until it is enabled.

    by says who: "staff:NAME", "merchant:NAME", "api", "auto-disable".
    """
    endpoint.is_active = False
    endpoint.disabled_reason = reason[:300]
    endpoint.disabled_at = now or utcnow()
    endpoint.disabled_by = by[:200]
    endpoint.save(update_fields=_DISABLE_FIELDS)


def endpoint_enable(*, endpoint: Endpoint) -> None:
    """Enable and give the breaker a fresh start: the merchant says it is fixed."""
    endpoint.is_active = True
    endpoint.disabled_reason = ""
    endpoint.disabled_at = None
    endpoint.disabled_by = ""
    endpoint.save(update_fields=_DISABLE_FIELDS)
    endpoint_breaker_reset(endpoint_id=endpoint.pk)


def endpoint_auto_disable_exempt(
    *, endpoints: Sequence[Endpoint], exempt: bool
) -> None:
    """Staff keep an endpoint out of (or put it back into) auto-disable."""
    Endpoint.objects.filter(pk__in=[e.pk for e in endpoints]).update(
        auto_disable_exempt=exempt
    )


def endpoint_breaker_reset(*, endpoint_id: str) -> None:
    EndpointHealth.objects.filter(endpoint_id=endpoint_id).update(
        breaker_state=EndpointHealth.State.CLOSED,
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
    EndpointHealth.objects.filter(endpoint_id=endpoint_id).update(
        breaker_state=EndpointHealth.State.OPEN,
        cooldown_seconds=cooldown,
        opened_at=now,
        next_probe_at=now + timedelta(seconds=cooldown),
        probe_delivery_id="",
        breaker_reason=reason[:300],
    )


def endpoint_delete(*, endpoint: Endpoint) -> None:
    endpoint.delete()


def endpoint_rotate_secret(
    *, endpoint: Endpoint, now: datetime | None = None
) -> tuple[EndpointSecret, datetime]:
    """New secret signs from now on; live older ones keep signing for the overlap."""
    now = now or utcnow()
    expires = now + timedelta(seconds=settings.SECRET_ROTATION_OVERLAP_SECONDS)
    with transaction.atomic():
        # Only the newest secret gets the overlap; any older secret still
        # alive from an earlier rotation ends now rather than lingering.
        live = EndpointSecret.objects.select_for_update().filter(endpoint=endpoint)
        live = [s for s in live if s.expires_at is None or s.expires_at > now]
        live.sort(key=lambda s: (s.created_at, s.pk), reverse=True)
        for index, old in enumerate(live):
            old.expires_at = expires if index == 0 else min(old.expires_at or now, now)
            old.save(update_fields=["expires_at"])
        secret = EndpointSecret.objects.create(
            endpoint=endpoint, secret=generate_secret(), created_at=now
        )
    return secret, expires


def endpoint_rate_take(*, endpoint_id: str, rate: float, now: float) -> float:
    """Take one token from the endpoint's shared bucket; 0 when granted, else seconds to wait.

    One conditional UPDATE does refill and take together, so dispatchers on
    any number of hosts share the bucket exactly (the arithmetic mirrors
    endpoints.ratelimit, which holds the table-tested rules).
    """
    cap = ratelimit.capacity(rate)
    elapsed = Greatest(Value(now) - F("rate_updated_at"), Value(0.0))
    refilled = Least(Value(cap), F("rate_tokens") + elapsed * Value(rate))
    granted = (
        # The condition is in the UPDATE itself (no subquery), so PostgreSQL
        # re-checks it on the latest row version when two takers collide.
        EndpointHealth.objects.filter(
            GreaterThanOrEqual(refilled, Value(1.0)), endpoint_id=endpoint_id
        ).update(
            rate_tokens=refilled - Value(1.0),
            rate_updated_at=Greatest(F("rate_updated_at"), Value(now)),
        )
    )
    if granted:
        return 0.0
    row = (
        EndpointHealth.objects.filter(endpoint_id=endpoint_id)
        .values("rate_tokens", "rate_updated_at")
        .first()
    )
    if row is None:
        return 0.0
    tokens = ratelimit.refill(
        row["rate_tokens"], row["rate_updated_at"], rate=rate, now=now
    )
    return max((1 - tokens) / rate, 0.001)


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

    Served from the process's key cache (`endpoints.keycache`) when it was
    read less than API_KEY_CACHE_SECONDS ago; else one round trip reads it.
    """
    if not raw.startswith(API_KEY_PREFIX) or len(raw) > 200:
        return None
    now = now or utcnow()
    key_hash = _api_key_hash(raw)
    key = live_keys.get(key_hash, now=now)
    if key is None:
        key = _apikey_read(key_hash, now=now)
        if key is not None:
            live_keys.put(key_hash, key, now=now)
    return key


def _apikey_read(key_hash: str, *, now: datetime) -> ApiKey | None:
    """The live key with its merchant, marking it used if it was not lately."""
    stale = now - timedelta(seconds=API_KEY_TOUCH_SECONDS)
    if connection.vendor != "postgresql":
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
