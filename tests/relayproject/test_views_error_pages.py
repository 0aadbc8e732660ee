"""With DEBUG off, 403/404/500 and CSRF failures are the site's own pages:
the portal's (product name, a way back) or the admin's; the API's are problems."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import include, path

from relayproject import urls as real_urls


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("the portal broke")


def refuse(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied("no")


urlpatterns = [
    path("portal/boom/", boom),
    path("portal/refuse/", refuse),
    path("admin/refuse/", refuse),
    path("", include("relayproject.urls")),
]
handler400, handler403 = real_urls.handler400, real_urls.handler403
handler404, handler500 = real_urls.handler404, real_urls.handler500


@pytest.fixture
def production(settings):
    settings.DEBUG = False
    settings.ROOT_URLCONF = __name__
    settings.PORTAL_PRODUCT_NAME = "Acme Payments"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "status", "title"),
    [
        ("/portal/no-such-page/", 404, "Page not found"),
        ("/no-such-page", 404, "Page not found"),
        ("/portal/refuse/", 403, "Not allowed"),
    ],
)
def test_portal_error_pages_are_the_portals_own(production, path, status, title):
    response = Client().get(path)

    assert response.status_code == status
    html = response.content.decode()
    assert f'data-status="{status}"' in html and f"<h1>{title}</h1>" in html
    assert '<a class="brand" href="/portal/">Acme Payments</a>' in html
    assert 'id="error-back"' in html
    assert "Traceback" not in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "status"), [("/admin/no-such-page/", 404), ("/admin/refuse/", 403)]
)
def test_admin_error_pages_look_like_the_admin(production, path, status):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x" * 16))

    response = client.get(path)

    assert response.status_code == status
    html = response.content.decode()
    assert f'data-status="{status}"' in html
    assert 'id="site-name"' in html  # the admin's header
    assert 'href="/admin/" id="error-back"' in html


@pytest.mark.django_db
def test_a_500_is_a_plain_page_that_needs_no_database(production, caplog):
    response = Client(raise_request_exception=False).get("/portal/boom/")

    assert response.status_code == 500
    html = response.content.decode()
    assert "Something went wrong" in html and "Acme Payments" in html
    assert "the portal broke" not in html and "Traceback" not in html


@pytest.mark.django_db
def test_a_csrf_failure_says_what_to_do(production):
    response = Client(enforce_csrf_checks=True).post("/portal/login/", {})

    assert response.status_code == 403
    html = response.content.decode()
    assert "reload it and send it again" in html and 'class="brand"' in html


@pytest.mark.django_db
def test_api_errors_stay_problems(production):
    response = Client().get("/api/v1/no-such-thing")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
