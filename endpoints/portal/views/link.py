"""Opening a one-time portal link, and the stylesheet that carries the accent colour."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from endpoints import portal_links

REFUSALS = {
    "used": (
        410,
        "This link has already been used",
        "Each link opens the portal once.",
    ),
    "expired": (410, "This link has expired", "Links are valid for a few minutes."),
    "unknown": (404, "This link is not valid", "Check that it was copied whole."),
}


@require_GET
def link_open(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = portal_links.portal_link_redeem(token=token)
    except portal_links.LinkRefused as exc:
        status, title, why = REFUSALS[exc.reason]
        return render(
            request,
            "portal/link_refused.html",
            {"title": title, "why": why},
            status=status,
        )
    # Whoever was signed in here before, this browser now holds the link's
    # merchant and role only. The session is flushed directly, not through
    # auth.logout: its signal's receivers log the request path, which holds
    # the token.
    request.session.flush()
    request.user = AnonymousUser()
    portal_links.session_start(request.session, link=link)
    return redirect("portal:endpoint_list", link.merchant.slug)


@require_GET
@cache_control(max_age=300)
def theme_css(request: HttpRequest) -> HttpResponse:
    # A stylesheet rather than a style attribute: the CSP allows no inline style.
    return HttpResponse(
        f":root {{ --accent: {settings.PORTAL_ACCENT_COLOR}; }}\n",
        content_type="text/css",
    )
