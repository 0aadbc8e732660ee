"""Sign-in, sign-out and the landing redirect."""

from __future__ import annotations

from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render

from endpoints import portal_links
from endpoints.models import Merchant
from endpoints.selectors import memberships_of
from relayproject.lib.clock import utcnow
from relayproject.portal.access import signed_in


class LoginView(auth_views.LoginView):
    """Failed sign-ins are counted, and locked out with a 429, by django-axes
    (settings: AXES_*), the same throttle as the admin's."""

    template_name = "portal/login.html"
    redirect_authenticated_user = True


login = LoginView.as_view()


def logout(request: HttpRequest) -> HttpResponse:
    """Ends a user's or a portal link's session alike (logout flushes the session)."""
    if not signed_in(request):
        return redirect_to_login(request.get_full_path())
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    auth.logout(request)
    return redirect("portal:login")


def home(request: HttpRequest) -> HttpResponse:
    if not signed_in(request):
        return redirect_to_login(request.get_full_path())
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET"])
    link = portal_links.session_link(request.session, now=utcnow())
    if link is not None:
        merchant = get_object_or_404(Merchant, pk=link.merchant_id, is_active=True)
        return redirect("portal:endpoint_list", slug=merchant.slug)
    memberships = memberships_of(user=request.user)
    if memberships:
        return redirect("portal:endpoint_list", slug=memberships[0].merchant.slug)
    return render(request, "portal/no_merchant.html", status=200)
