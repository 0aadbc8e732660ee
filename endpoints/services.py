"""Writes for endpoints: created with their first secret, updated, disabled,
enabled, deleted (merchants: endpoints.merchant_services; a secret's rotation:
endpoints.secret_rotation; the checks of an endpoint's fields:
endpoints.endpoint_fields; endpoint health: endpoints.health)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from endpoints import (
    broker_fields,
    brokers,
    client_credentials,
    quotas,
    retry_policy,
    signing_default,
    signing_keys,
    verification,
)
from endpoints.credentials_guard import credentials_row_errors
from endpoints.endpoint_fields import field_errors, pull_field_errors
from endpoints.health import health_create
from endpoints.models import (
    Endpoint,
    EndpointSecret,
    Merchant,
)
from endpoints.probes import endpoint_breaker_reset
from endpoints.secrets import generate_secret
from relayproject.lib.clock import utcnow

logger = logging.getLogger(__name__)
_UNSET = object()
SESSION_NOT_SWITCHED = (
    "A listen session is neither enabled nor disabled: end it with DELETE "
    ".../listen-sessions/{id}, and start a new one to listen again."
)


def endpoint_create(
    *,
    merchant: Merchant,
    url: str | None = "",
    kind: str = brokers.HTTP,
    target: dict | None = None,
    description: str = "",
    event_types: Sequence[str] = (),
    max_attempts: int | None = None,
    rate_limit_per_second: float | None = None,
    filter: dict | None = None,
    headers: dict[str, str] | None = None,
    max_in_flight: int | None = None,
    permanent_statuses: Sequence[int] = (),
    ordered: bool = False,
    retry_schedule: list[float] | None = None,
    timeout_seconds: float | None = None,
    signing: str | None = None,
    auth: dict | None = None,
    tls: dict | None = None,
    visibility_timeout_seconds: int | None = None,
    now: datetime,
) -> Endpoint:
    """Create an endpoint with its first signing secret and a closed breaker.

    A broker kind's url may carry user:password: they are stored apart,
    encrypted, and the url without them (endpoints/broker_fields.py). auth and
    tls: endpoints/client_credentials.py. signing None: the merchant's default
    scheme, else the relay's (endpoints/signing_default.py). A pull endpoint
    takes no url and nothing that shapes a send, and may take a
    visibility_timeout_seconds (endpoints/endpoint_fields.py)."""
    if signing is None:
        signing = signing_default.scheme_for_new_endpoint(merchant)
    destination, errors = broker_fields.destination_clean(
        merchant=merchant, kind=kind, url=url, target=target or {}
    )
    errors |= field_errors(
        event_types=event_types,
        max_attempts=max_attempts,
        rate_limit_per_second=rate_limit_per_second,
        filter=filter,
        headers=headers,
        max_in_flight=max_in_flight,
        permanent_statuses=list(permanent_statuses),
        signing=signing,
    )
    errors |= retry_policy.endpoint_policy_errors(
        merchant=merchant,
        endpoint=None,
        given={
            "retry_schedule": retry_schedule,
            "max_attempts": max_attempts,
            "timeout_seconds": timeout_seconds,
        },
    )
    credentials: dict = {}
    if kind != brokers.PULL:  # refused whole below: nothing to check in them
        credentials, problems = client_credentials.credentials_clean(
            endpoint=None, kind=kind, headers=headers, auth=auth, tls=tls, url=url
        )
        _merge(errors, problems)
    if kind in brokers.BROKER_KINDS and permanent_statuses:
        errors["permanent_statuses"] = [broker_fields.NO_STATUSES]
    errors |= pull_field_errors(
        kind=kind,
        given=_given(
            headers=headers,
            auth=auth,
            tls=tls,
            permanent_statuses=list(permanent_statuses),
            rate_limit_per_second=rate_limit_per_second,
            max_in_flight=max_in_flight,
            timeout_seconds=timeout_seconds,
        ),
        visibility_timeout_seconds=visibility_timeout_seconds,
    )
    if len(description) > 500:
        errors["description"] = ["At most 500 characters."]
    if errors or destination is None:
        raise ValidationError(errors)
    with transaction.atomic():
        quotas.endpoint_room_take(merchant)
        endpoint = Endpoint(
            merchant=merchant,
            **destination.columns(),
            description=description,
            event_types=list(dict.fromkeys(event_types)),
            max_attempts=max_attempts,
            rate_limit_per_second=rate_limit_per_second,
            filter=filter or None,
            headers=headers or {},
            max_in_flight=max_in_flight,
            permanent_statuses=sorted(set(permanent_statuses)),
            ordered=bool(ordered),
            retry_schedule=retry_schedule,
            timeout_seconds=timeout_seconds,
            visibility_timeout_seconds=visibility_timeout_seconds,
            **signing_keys.signing_columns(scheme=signing, private_key=None),
        )
        client_credentials.credentials_apply(endpoint, credentials)
        endpoint.save(force_insert=True)
        # Only an HTTP receiver can echo a challenge. The operator's host list
        # is what a broker endpoint is trusted by; a pull endpoint is sent
        # nothing: only the merchant's own keys fetch its messages.
        if destination.kind == brokers.HTTP and verification.required(merchant):
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
    kind=_UNSET,
    url=_UNSET,
    target=_UNSET,
    description=_UNSET,
    event_types=_UNSET,
    max_attempts=_UNSET,
    rate_limit_per_second=_UNSET,
    filter=_UNSET,
    headers=_UNSET,
    max_in_flight=_UNSET,
    permanent_statuses=_UNSET,
    ordered=_UNSET,
    signing=_UNSET,
    is_active=_UNSET,
    retry_schedule=_UNSET,
    timeout_seconds=_UNSET,
    auth=_UNSET,
    tls=_UNSET,
    visibility_timeout_seconds=_UNSET,
    by: str = "api",
    may_move_credentials: bool = True,
    now: datetime,
) -> Endpoint:
    """Change only the fields given; validate them all before writing any.

    A broker url given without credentials keeps the stored ones only on the
    same scheme, host and port (endpoints/broker_fields.py). auth and tls
    (None removes either): endpoints/client_credentials.py. may_move_credentials
    False refuses a URL change while the endpoint has auth (the portal's
    developers: endpoints/credentials_guard.py)."""
    destination, errors = broker_fields.destination_change(
        endpoint=endpoint,
        kind=None if kind is _UNSET else kind,
        url=None if url is _UNSET else url,
        target=None if target is _UNSET else target,
    )
    errors |= field_errors(
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
        signing=None if signing is _UNSET else signing,
    )
    to_broker = (endpoint.kind if kind in (_UNSET, None) else kind) != brokers.HTTP
    if to_broker and permanent_statuses is not _UNSET and permanent_statuses:
        errors["permanent_statuses"] = [broker_fields.NO_STATUSES]
    elif to_broker and permanent_statuses is _UNSET and endpoint.permanent_statuses:
        permanent_statuses = []  # an HTTP endpoint's, meaningless now
    errors |= retry_policy.endpoint_policy_errors(
        merchant=endpoint.merchant,
        endpoint=endpoint,
        given={
            name: value
            for name, value in (
                ("retry_schedule", retry_schedule),
                ("max_attempts", max_attempts),
                ("timeout_seconds", timeout_seconds),
            )
            if value is not _UNSET
        },
    )
    if description is not _UNSET and len(description or "") > 500:
        errors["description"] = ["At most 500 characters."]
    if endpoint.listen_session and is_active not in (_UNSET, None):
        # Enabling an ended session would bring back an endpoint the quota no
        # longer counts; disabling one would leave its messages pending.
        errors["is_active"] = [SESSION_NOT_SWITCHED]
    credentials: dict = {}
    if endpoint.kind != brokers.PULL:  # a kind that stays (broker_fields.KIND_FIXED)
        credentials, problems = client_credentials.credentials_clean(
            endpoint=endpoint,
            kind=endpoint.kind if kind in (_UNSET, None) else kind,
            headers=endpoint.headers if headers is _UNSET else headers,
            auth=client_credentials.UNCHANGED if auth is _UNSET else auth,
            tls=client_credentials.UNCHANGED if tls is _UNSET else tls,
            url=destination.url if destination else endpoint.url,
        )
        _merge(errors, problems)
    errors |= pull_field_errors(
        kind=endpoint.kind,
        given=_given(
            headers=headers,
            auth=auth,
            tls=tls,
            permanent_statuses=permanent_statuses,
            rate_limit_per_second=rate_limit_per_second,
            max_in_flight=max_in_flight,
            timeout_seconds=timeout_seconds,
        ),
        visibility_timeout_seconds=None
        if visibility_timeout_seconds is _UNSET
        else visibility_timeout_seconds,
    )
    if errors.get("kind") == [broker_fields.KIND_FIXED]:
        errors = {"kind": errors["kind"]}  # the rest would be about the other kind
    if errors:
        raise ValidationError(errors)
    changes = {
        **(destination.columns() if destination else {}),
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
        **signing_keys.signing_columns(
            scheme=None if signing is _UNSET else signing,
            private_key=endpoint.signing_private_key,
        ),
        # None (null) clears either: the merchant's default, else the relay's.
        "retry_schedule": retry_schedule,
        "timeout_seconds": timeout_seconds,
        "visibility_timeout_seconds": visibility_timeout_seconds,
    }
    before = broker_fields.Destination(
        endpoint.kind, endpoint.url, endpoint.target, endpoint.broker_credentials
    )
    moved = destination is not None and destination != before
    url_changed = moved and (destination.kind, destination.url) != (
        before.kind,
        before.url,
    )
    with transaction.atomic():
        if errors := credentials_row_errors(
            endpoint,
            url=destination.url if destination else endpoint.url,
            auth=client_credentials.UNCHANGED if auth is _UNSET else auth,
            tls=client_credentials.UNCHANGED if tls is _UNSET else tls,
            changes=credentials,
            url_changed=url_changed,
            may_move_credentials=may_move_credentials,
        ):
            raise ValidationError(errors)
        # Only the fields given are written: a stale instance must not undo
        # what happened to the row since it was read (a verification, a disable).
        fields = [field for field, value in changes.items() if value is not _UNSET]
        for field in fields:
            setattr(endpoint, field, changes[field])
        fields += client_credentials.credentials_apply(endpoint, credentials)
        if endpoint.kind != brokers.HTTP and endpoint.awaiting_verification:
            # Nothing at a broker can answer the challenge: it would wait forever.
            _verification_dropped(endpoint)
            fields += ["awaiting_verification", "verification_challenge"]
        elif url_changed and verification.required(endpoint.merchant):
            # A new URL may be anyone's: it proves itself again before it gets
            # anything, with a challenge of its own.
            verification.request_fields_set(endpoint, now=now)
            fields += verification.REQUEST_FIELDS
        endpoint.save(update_fields=list(dict.fromkeys([*fields, "updated_at"])))
        if moved:
            # The failures were the old destination's: the new one starts closed.
            endpoint_breaker_reset(endpoint_id=endpoint.pk)
        if is_active is True and not endpoint.is_active:
            endpoint_enable(endpoint=endpoint)
        elif is_active is False and endpoint.is_active:
            endpoint_disable(
                endpoint=endpoint, reason="disabled by user", by=by, now=now
            )
    return endpoint


def _given(**values: object) -> dict[str, object]:
    """The values of an update, those not given as None."""
    return {name: None if value is _UNSET else value for name, value in values.items()}


def _merge(errors: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    for field, messages in more.items():
        errors.setdefault(field, []).extend(messages)


def _verification_dropped(endpoint: Endpoint) -> None:
    endpoint.awaiting_verification = False
    endpoint.verification_challenge = None


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
