"""Site-root views that are not part of an app: the health check, error pages."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database answers a query, else 503 (for load balancers)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError:
        return JsonResponse({"status": "unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


# --- Error pages (handler403/404/500 and CSRF failures in relayproject/urls.py)
# Portal paths get the portal's page (product name, accent, a way back); the
# admin an admin-styled page; the API never sees these (ApiProblemMiddleware
# turns every API error into a problem). With DEBUG on, Django shows its own
# technical 404 and 500 pages instead.

ERRORS = {
    400: ("Bad request", "The request could not be understood."),
    403: ("Not allowed", "You do not have access to this page."),
    404: ("Page not found", "There is nothing at this address."),
    500: ("Something went wrong", "The error has been logged; try again shortly."),
}


def _error_page(request: HttpRequest, status: int, detail: str = "") -> HttpResponse:
    title, why = ERRORS[status]
    if request.path.startswith("/admin/"):
        template, back = "admin/error.html", reverse("admin:index")
    else:
        template, back = "portal/error.html", reverse("portal:home")
    return render(
        request,
        template,
        {"title": title, "why": detail or why, "status": status, "back": back},
        status=status,
    )


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error_page(request, 400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Our own refusals say why in words meant for the reader (the admin's
    # password guard, the API-key guard); Django's carry no message.
    return _error_page(request, 403, str(exception or ""))


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error_page(request, 404)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return _error_page(
        request,
        403,
        "This form was open too long or came from another page; go back, "
        "reload it and send it again.",
    )


def server_error(request: HttpRequest) -> HttpResponse:
    """No template tags that touch the database or the session: they may be
    what failed."""
    title, why = ERRORS[500]
    html = render_to_string(
        "error_500.html",
        {"title": title, "why": why, "product_name": settings.PORTAL_PRODUCT_NAME},
    )
    return HttpResponse(html, status=500)
