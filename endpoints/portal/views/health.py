"""Per-endpoint health: 24 h percentiles, success rate, hourly chart, breaker."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from endpoints.portal.access import Access, portal_view
from endpoints.portal.present import breaker_words, hourly_chart
from endpoints.portal.views.common import page
from relayproject.clock import utcnow


@portal_view()
def endpoint_health(request: HttpRequest, access: Access) -> HttpResponse:
    from deliveries.portal_selectors import endpoint_window

    window = endpoint_window(endpoint_id=access.endpoint.pk, now=utcnow())
    return page(
        request,
        access,
        "endpoint_health.html",
        {
            "window": window,
            "chart": hourly_chart(window.hours),
            "breaker": breaker_words(
                getattr(access.endpoint, "health", None),
                active=access.endpoint.is_active,
            ),
            "health": getattr(access.endpoint, "health", None),
        },
    )
