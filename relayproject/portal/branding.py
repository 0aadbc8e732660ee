"""What an embedding platform sets: the product name, accent colour and framing.

PORTAL_FRAME_ANCESTORS lists the origins that may show the portal in an
iframe. X-Frame-Options cannot name origins, so on portal pages it is
replaced by the CSP `frame-ancestors` directive (added to any CSP already on
the response); every other page, and the portal when the list is empty, keeps
X-Frame-Options: DENY.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse

CSP = "Content-Security-Policy"


def branding(request: HttpRequest) -> dict:
    return {
        "product_name": settings.PORTAL_PRODUCT_NAME,
        "accent_color": settings.PORTAL_ACCENT_COLOR,
    }


def with_frame_ancestors(policy: str, origins: list[str]) -> str:
    directives = [
        d.strip()
        for d in policy.split(";")
        if d.strip() and not d.strip().lower().startswith("frame-ancestors")
    ]
    directives.append("frame-ancestors " + " ".join(origins))
    return "; ".join(directives)


def _portal_prefix() -> str | None:
    # Wherever the URLconf mounts the portal: /portal/ standalone, under its
    # own prefix in another project.
    try:
        return reverse("portal:home")
    except NoReverseMatch:
        return None


class PortalFramingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        origins = settings.PORTAL_FRAME_ANCESTORS
        prefix = _portal_prefix() if origins else None
        if prefix is not None and request.path.startswith(prefix):
            if response.has_header("X-Frame-Options"):
                del response["X-Frame-Options"]
            response[CSP] = with_frame_ancestors(response.get(CSP, ""), origins)
        return response
