"""Sign-in, sign-out and the landing redirect."""

from __future__ import annotations

from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from endpoints.portal.selectors import memberships_of


class LoginView(auth_views.LoginView):
    """Failed sign-ins are counted, and locked out with a 429, by django-axes
    (settings: AXES_*), the same throttle as the admin's."""

    template_name = "portal/login.html"
    redirect_authenticated_user = True


login = LoginView.as_view()


@login_required
@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    auth.logout(request)
    return redirect("portal:login")


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    memberships = memberships_of(user=request.user)
    if memberships:
        return redirect("portal:endpoint_list", slug=memberships[0].merchant.slug)
    return render(request, "portal/no_merchant.html", status=200)
