"""Per-endpoint health: 24 h percentiles, success rate, hourly chart, breaker."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from deliveries.pull.leasing import visibility_seconds
from endpoints import brokers
from endpoints.words import breaker_words, degraded_words, slow_words, state_label
from relayproject.lib.clock import utcnow
from relayproject.portal.access import Access, portal_view
from relayproject.portal.present import hourly_chart
from relayproject.portal.selectors import endpoint_errors, endpoint_window
from relayproject.portal.views.common import page


@portal_view()
def endpoint_health(request: HttpRequest, access: Access) -> HttpResponse:
    now = utcnow()
    endpoint = access.endpoint
    window = endpoint_window(endpoint_id=endpoint.pk, now=now)
    health = getattr(endpoint, "health", None)
    below = settings.DEGRADED_SUCCESS_RATE
    return page(
        request,
        access,
        "endpoint_health.html",
        {
            "window": window,
            "chart": hourly_chart(window.hours),
            "breaker": breaker_words(health, active=endpoint.is_active),
            "label": state_label(
                health, active=endpoint.is_active, degraded_below=below
            ),
            "health": health,
            "threshold": health.failure_threshold
            if health
            else settings.BREAKER_FAILURE_THRESHOLD,
            "slow": slow_words(
                health, base_threshold=settings.BREAKER_FAILURE_THRESHOLD
            ),
            "degraded": degraded_words(health, below=below),
            "errors": endpoint_errors(
                endpoint_id=endpoint.pk, now=now, pulled=endpoint.kind == brokers.PULL
            ),
            "visibility_seconds": visibility_seconds(endpoint),
        },
    )
