"""Writes for merchants, endpoints and secrets (endpoint health: endpoints.health)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from endpoints import destinations, quotas, verification
from endpoints.custom_headers import header_errors
from endpoints.filtering import filter_errors
from endpoints.health import endpoint_breaker_reset, health_create
from endpoints.matching import is_valid_subscription
from endpoints.models import (
    Endpoint,
    EndpointSecret,
    Merchant,
)
from endpoints.secrets import generate_secret
from relayproject.lib.clock import utcnow

logger = logging.getLogger(__name__)
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
        reason = exc.reason
        if exc.code == destinations.DNS_ERROR:
            # Said plainly: a host that goes live later cannot be saved yet.
            reason += ": the host must exist in DNS when the endpoint is saved"
        raise ValidationError({"url": [reason]}) from exc


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
    ordered: bool = False,
    now: datetime,
) -> Endpoint:
    """Create an endpoint with its first signing secret and a closed breaker."""
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
            ordered=bool(ordered),
        )
        if verification.required(merchant):
            verification.request_fields_set(endpoint, now=now)
            endpoint.save(update_fields=verification.REQUEST_FIELDS)
        EndpointSecret.objects.create(
            endpoint=endpoint, secret=generate_secret(), created_at=now
        )
        health_create(endpoint=endpoint)
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
    ordered=_UNSET,
    is_active=_UNSET,
    by: str = "api",
    now: datetime,
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
        # Read at publish: lanes already waiting drain in order either way.
        "ordered": bool(ordered) if ordered is not _UNSET else _UNSET,
    }
    url_changed = url is not _UNSET and url != endpoint.url
    # Only the fields given are written: a stale instance must not undo what
    # happened to the row since it was read (a verification, a disable).
    fields = [field for field, value in changes.items() if value is not _UNSET]
    for field in fields:
        setattr(endpoint, field, changes[field])
    if url_changed and verification.required(endpoint.merchant):
        # A new URL may be anyone's: it proves itself again before it gets
        # anything, with a challenge of its own.
        verification.request_fields_set(endpoint, now=now)
        fields += verification.REQUEST_FIELDS
    with transaction.atomic():
        endpoint.save(update_fields=list(dict.fromkeys([*fields, "updated_at"])))
        if url_changed:
            # The failures were the old URL's: the new one starts closed.
            endpoint_breaker_reset(endpoint_id=endpoint.pk)
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


def endpoints_disable(
    *, endpoint_ids: Iterable[str], reason: str, by: str, now: datetime | None = None
) -> list[str]:
    """The one way an endpoint is disabled; returns the ids this call disabled.

    by says who: "receiver" (a 410), "auto-disable", "staff:NAME",
    "merchant:NAME", "api". Pending deliveries stay pending (held) until it is
    enabled. Conditional on is_active, so a disable by anyone else in between
    keeps its who and why. Each disable logs one line here; the
    relay.endpoint.disabled event and email follow from disabled_at
    (deliveries/notifications/watch.py).
    """
    now = now or utcnow()
    fields = {
        "is_active": False,
        "disabled_reason": reason[:300],
        "disabled_at": now,
        "disabled_by": by[:200],
        "updated_at": now,
    }
    disabled = []
    # One conditional UPDATE each (a flush's 410s are a handful at most), so
    # the count says which of them this call disabled.
    for endpoint_id in sorted(set(endpoint_ids)):
        if Endpoint.objects.filter(pk=endpoint_id, is_active=True).update(**fields):
            disabled.append(endpoint_id)
            logger.info(
                "endpoint disabled endpoint=%s by=%s reason=%s",
                endpoint_id,
                fields["disabled_by"],
                fields["disabled_reason"],
                extra={"endpoint_id": endpoint_id},
            )
    return disabled


def endpoint_disable(
    *, endpoint: Endpoint, reason: str, by: str = "", now: datetime | None = None
) -> bool:
    """endpoints_disable for one endpoint, kept up to date; False if it was not active."""
    now = now or utcnow()
    if not endpoints_disable(endpoint_ids=[endpoint.pk], reason=reason, by=by, now=now):
        return False
    endpoint.is_active = False
    endpoint.disabled_reason = reason[:300]
    endpoint.disabled_at = now
    endpoint.disabled_by = by[:200]
    endpoint.updated_at = now
    return True


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


def endpoint_delete(*, endpoint: Endpoint) -> None:
    endpoint.delete()


def endpoint_rotate_secret(
    *, endpoint: Endpoint, now: datetime
) -> tuple[EndpointSecret, datetime]:
    """New secret signs from now on; live older ones keep signing for the overlap."""
    expires = now + timedelta(seconds=settings.SECRET_ROTATION_OVERLAP_SECONDS)
    with transaction.atomic():
        # Only the newest secret gets the overlap; any older secret still
        # alive from an earlier rotation ends now rather than lingering.
        live = EndpointSecret.objects.select_for_update().filter(
            merchant_id=endpoint.merchant_id,  # one shard on Citus
            endpoint=endpoint,
        )
        live = [s for s in live if s.expires_at is None or s.expires_at > now]
        live.sort(key=lambda s: (s.created_at, s.pk), reverse=True)
        for index, old in enumerate(live):
            old.expires_at = expires if index == 0 else min(old.expires_at or now, now)
            old.save(update_fields=["expires_at"])
        secret = EndpointSecret.objects.create(
            endpoint=endpoint, secret=generate_secret(), created_at=now
        )
    return secret, expires
