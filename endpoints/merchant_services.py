"""Writes for merchants: made, and their name or their endpoints' defaults
(retry policy, signing scheme) changed (their endpoints: endpoints.services)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from endpoints import retry_policy, signing_keys
from endpoints.models import Merchant

_UNSET = object()


def merchant_create(
    *,
    slug: str,
    name: str,
    retry_schedule: list[float] | None = None,
    max_attempts: int | None = None,
    timeout_seconds: float | None = None,
) -> Merchant:
    """A merchant, with its endpoints' retry policy defaults if given."""
    policy = {
        "retry_schedule": retry_schedule,
        "max_attempts": max_attempts,
        "timeout_seconds": timeout_seconds,
    }
    if errors := retry_policy.merchant_defaults_errors(None, policy):
        raise ValidationError(errors)
    merchant = Merchant(slug=slug, name=name, **policy)
    merchant.full_clean()
    merchant.save()
    return merchant


def merchant_update(
    *,
    merchant: Merchant,
    name=_UNSET,
    retry_schedule=_UNSET,
    max_attempts=_UNSET,
    timeout_seconds=_UNSET,
    signing=_UNSET,
) -> Merchant:
    """Change a merchant's name or its endpoints' defaults (retry policy,
    signing scheme), only the fields given; None clears a default (back to the
    relay's setting). A signing default is taken by endpoints created after:
    existing ones keep theirs."""
    changes = {
        field: value
        for field, value in (
            ("name", name),
            ("retry_schedule", retry_schedule),
            ("max_attempts", max_attempts),
            ("timeout_seconds", timeout_seconds),
            ("signing", signing),
        )
        if value is not _UNSET
    }
    policy = {f: v for f, v in changes.items() if f in retry_policy.FIELDS}
    errors = retry_policy.merchant_defaults_errors(merchant, policy)
    if "name" in changes and not 1 <= len(changes["name"] or "") <= 200:
        errors["name"] = ["From 1 to 200 characters."]
    if problems := signing_keys.scheme_errors(changes.get("signing")):
        errors["signing"] = problems
    if errors:
        raise ValidationError(errors)
    for field, value in changes.items():
        setattr(merchant, field, value)
    if changes:
        merchant.save(update_fields=list(changes))
    return merchant
