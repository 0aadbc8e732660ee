"""Console template filters: where an alert on pipeline health leads."""

from __future__ import annotations

import re

from django import template
from django.urls import reverse

from endpoints.retry_policy import policy_in_force

register = template.Library()

_ID = re.compile(r"\b(ep|dlv)_[0-9a-z]+\b")
# Alerts about no single row lead to the list that shows them.
_BY_KIND = {
    "dead_growing": "admin:deliveries_deadletter_changelist",
    "dispatcher_dead": "admin:deliveries_dispatcherheartbeat_changelist",
    "dispatcher_stale": "admin:deliveries_dispatcherheartbeat_changelist",
}


@register.filter
def alert_link(alert) -> str:
    """The page of the endpoint or delivery the alert names, else its list; ""."""
    found = _ID.search(alert.text)
    if found:
        name = {"ep": "endpoints_endpoint", "dlv": "deliveries_delivery"}
        return reverse(f"admin:{name[found.group(1)]}_change", args=[found.group(0)])
    target = _BY_KIND.get(alert.kind)
    return reverse(target) if target else ""


@register.filter
def attempts_of(delivery) -> str:
    """E.g. "3 of 10": attempts spent of this round's budget; after a replay,
    which starts a fresh budget, also the attempts made in all."""
    budget = policy_in_force(delivery.endpoint).max_attempts
    spent = delivery.attempts_in_budget
    words = f"{spent} of {budget}"
    if delivery.attempt_count != spent:
        words += f" ({delivery.attempt_count} in all)"
    return words
