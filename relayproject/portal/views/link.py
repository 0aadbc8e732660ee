"""Opening a one-time portal link, confirming an extra notification address
from the link in its email, and the stylesheet that carries the accent colour."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_http_methods

from deliveries.notifications import addresses
from endpoints import portal_links
from relayproject.lib.clock import utcnow

REFUSALS = {
    "used": (
        410,
        "This link has already been used",
        "Each link opens the portal once.",
    ),
    "expired": (410, "This link has expired", "Links are valid for a few minutes."),
    "inactive": (
        403,
        "This portal is closed",
        "The account this link was made for is not active; the link no longer works.",
    ),
    "unknown": (404, "This link is not valid", "Check that it was copied whole."),
}


def _private(response: HttpResponse) -> HttpResponse:
    # The token is in this page's URL: no cache keeps it, and the Referer of
    # what the page loads (its stylesheets) names the origin only. Not
    # "no-referrer": browsers then send `Origin: null` with the button's POST,
    # which the CSRF check refuses.
    add_never_cache_headers(response)
    response["Referrer-Policy"] = "origin"
    return response


@require_http_methods(["GET", "HEAD", "POST"])
def link_open(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows a button; only its POST (with CSRF) uses the link.

    So a link opened by a mail scanner's prefetch, or planted in an <img> on
    another site, neither spends it nor signs out whoever is signed in here.
    """
    if request.method != "POST":
        return _private(
            render(
                request,
                "portal/link_open.html",
                {"current": _current_session(request)},
            )
        )
    try:
        link = portal_links.portal_link_redeem(token=token, now=utcnow())
    except portal_links.LinkRefused as exc:
        status, title, why = REFUSALS[exc.reason]
        return _private(
            render(
                request,
                "portal/link_refused.html",
                {"title": title, "why": why},
                status=status,
            )
        )
    # Whoever was signed in here before, this browser now holds the link's
    # merchant and role only. The session is flushed directly, not through
    # auth.logout: its signal's receivers log the request path, which holds
    # the token.
    request.session.flush()
    request.user = AnonymousUser()
    portal_links.session_start(request.session, link=link, now=utcnow())
    return redirect("portal:endpoint_list", link.merchant.slug)


ADDRESS_REFUSALS = {
    addresses.EXPIRED: (
        410,
        "This link has expired",
        f"Confirmation links work for {addresses.CONFIRM_TTL.days} days. Ask "
        "whoever added your address for a new one; nothing is sent to it meanwhile.",
    ),
    addresses.UNKNOWN: (
        404,
        "This link is not valid",
        "It was used already, the address was removed, or the link was not "
        "copied whole. Nothing is sent to an address that is not confirmed.",
    ),
}


@require_http_methods(["GET", "HEAD", "POST"])
def address_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the address and a button; only its POST confirms it.

    No sign-in: the token, sent to that address only, is the proof. Under
    /portal/link/, so the log filter that keeps portal link tokens out of
    every log line keeps these out too (relayproject/lib/logs.py). The page
    shows the relay's words only, nothing a merchant chose.
    """
    now = utcnow()
    if request.method == "POST":
        outcome = addresses.address_confirm(token=token, now=now)
        context = {"state": outcome}
    else:
        row = addresses.address_by_token(token)
        outcome = addresses.UNKNOWN if row is None else addresses.EXPIRED
        if row is not None and row.token_expires_at > now:
            outcome = "open"
        context = {"state": outcome, "email": row.email if row else ""}
    status = 200
    if outcome in ADDRESS_REFUSALS:
        status, context["title"], context["why"] = ADDRESS_REFUSALS[outcome]
    return _private(
        render(request, "portal/address_confirm.html", context, status=status)
    )


def _current_session(request: HttpRequest) -> str:
    """Who is signed in in this browser now, in words ("" for nobody)."""
    if portal_links.session_link(request.session, now=utcnow()) is not None:
        return "a portal link"
    if request.user.is_authenticated:
        return request.user.get_username()
    return ""


@require_GET
@cache_control(max_age=300)
def theme_css(request: HttpRequest) -> HttpResponse:
    # A stylesheet rather than a style attribute: the CSP allows no inline style.
    return HttpResponse(
        f":root {{ --accent: {settings.PORTAL_ACCENT_COLOR}; }}\n",
        content_type="text/css",
    )
