"""PORTAL_FRAME_ANCESTORS under a prefix of another project's choosing: the
portal's pages may be framed wherever the URLconf mounts them, and only they."""

from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

ORIGIN = "https://app.example.com"


def page(request: HttpRequest) -> HttpResponse:
    return HttpResponse("the project's own page")


urlpatterns = [
    path("relay/", include("relayproject.relay_urls")),
    path("portal/elsewhere", page),
]

pytestmark = pytest.mark.urls(__name__)


@pytest.fixture(autouse=True)
def _framed(settings):
    settings.PORTAL_FRAME_ANCESTORS = [ORIGIN]


def test_the_portal_under_the_prefix_may_be_framed_by_the_listed_origins(client):
    answer = client.get("/relay/portal/login/")
    assert answer.status_code == 200
    assert not answer.has_header("X-Frame-Options")
    assert f"frame-ancestors {ORIGIN}" in answer["Content-Security-Policy"]


def test_the_projects_own_pages_are_not_framed(client):
    answer = client.get("/portal/elsewhere")
    assert answer["X-Frame-Options"] == "DENY"
    assert ORIGIN not in answer.get("Content-Security-Policy", "")
