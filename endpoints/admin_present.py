"""How the staff console shows endpoint values: whole ms, percentages, words.

Pure helpers shared by the endpoint and endpoint-health admins; they return
HTML-safe strings for list columns.
"""

from __future__ import annotations

from datetime import datetime

from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from endpoints.models import EndpointHealth


def cut(text: str, size: str = "") -> SafeString:
    """A long value cut with an ellipsis by CSS; the whole of it in the tooltip."""
    return format_html('<span class="cut {}" title="{}">{}</span>', size, text, text)


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def percent(rate: float | None) -> str:
    if rate is None:
        return "-"
    # 99.96 % must not read as 100 %: one decimal below a whole 100.
    return "100 %" if rate >= 1 else f"{min(rate * 100, 99.9):.1f} %"


def utc(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def breaker_words(health: EndpointHealth) -> str:
    """E.g. "open since 2026-12-03 14:02:05 UTC: 10 consecutive failures (http 500)"."""
    failures = health.consecutive_failures
    plural = "" if failures == 1 else "s"
    reason = f" ({health.breaker_reason})" if health.breaker_reason else ""
    if health.breaker_state == EndpointHealth.State.OPEN:
        return (
            f"open since {utc(health.opened_at)}{reason}; next probe at "
            f"{utc(health.next_probe_at)}"
        )
    if health.breaker_state == EndpointHealth.State.HALF_OPEN:
        return f"half-open: a probe decides whether it closes{reason}"
    if failures:
        return (
            f"closed, {failures} consecutive failure{plural} "
            f"(opens at {health.failure_threshold})"
        )
    return "closed"


def deliveries_links(endpoint_id: str) -> SafeString:
    query = urlencode({"endpoint__id__exact": endpoint_id})
    return format_html(
        '<a href="{}?{}">dead letters</a> · <a href="{}?{}">deliveries</a>',
        reverse("admin:deliveries_deadletter_changelist"),
        query,
        reverse("admin:deliveries_delivery_changelist"),
        query,
    )
