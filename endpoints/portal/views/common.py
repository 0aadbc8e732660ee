"""Rendering shared by portal views: every page knows the merchant switcher."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from endpoints.portal.access import Access
from endpoints.portal.selectors import memberships_of


def page(
    request: HttpRequest,
    access: Access,
    template: str,
    context: dict | None = None,
    *,
    status: int = 200,
) -> HttpResponse:
    return render(
        request,
        f"portal/{template}",
        {
            "access": access,
            "merchant": access.merchant,
            "endpoint": access.endpoint,
            "can_edit": access.can_edit,
            "memberships": memberships_of(user=request.user),
            **(context or {}),
        },
        status=status,
    )
