"""Rendering shared by portal views: every page knows the merchant switcher."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from endpoints.selectors import memberships_of
from relayproject.portal.access import Access

# Which header section and endpoint tab each page belongs to (current-page state).
SECTIONS = {
    "delivery_list": "deliveries",
    "delivery_detail": "deliveries",
    "catalogue": "catalogue",
    "notifications": "notifications",
    "notification_settings": "notifications",
    "listen_sessions": "listen",
    "listen_session_start": "listen",
}
TABS = {
    "endpoint_detail": "overview",
    "endpoint_deliveries": "deliveries",
    "endpoint_health": "health",
    "endpoint_example": "example",
    "endpoint_recover": "recover",
    "endpoint_credentials": "credentials",
    "secret_rotate": "overview",
    "endpoint_verification": "overview",
}


def page(
    request: HttpRequest,
    access: Access,
    template: str,
    context: dict | None = None,
    *,
    status: int = 200,
) -> HttpResponse:
    name = request.resolver_match.url_name if request.resolver_match else ""
    return render(
        request,
        f"portal/{template}",
        {
            "access": access,
            "merchant": access.merchant,
            "endpoint": access.endpoint,
            "can_edit": access.can_edit,
            "nav": SECTIONS.get(name, "endpoints"),
            "tab": TABS.get(name, ""),
            "memberships": memberships_of(user=request.user)
            if request.user.is_authenticated
            else [],
            **(context or {}),
        },
        status=status,
    )
