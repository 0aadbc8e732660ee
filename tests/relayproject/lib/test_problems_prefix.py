"""ApiProblemMiddleware under a prefix of another project's choosing: the
relay's API is found where the URLconf mounts it, and the project's own paths
(its own /api/ among them) are left alone."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from relayproject.lib.problems import api_paths, body_limit


@csrf_exempt
def echo(request: HttpRequest) -> HttpResponse:
    return HttpResponse(request.body, content_type="text/plain")


# A host project's URLconf: the relay under relay/, an API of its own.
urlpatterns = [
    path("relay/", include("relayproject.relay_urls")),
    path("api/echo", echo),
]

pytestmark = pytest.mark.urls(__name__)


def test_the_api_is_found_under_the_prefix():
    assert api_paths() == ("/relay/api/", "/relay/api/v1/events/batch")


def test_the_relays_api_under_the_prefix_is_answered_with_problems(client):
    answer = client.post("/relay/api/v1/events", "hello", content_type="text/plain")
    assert (answer.status_code, answer["Content-Type"]) == (
        415,
        "application/problem+json",
    )


def test_the_projects_own_api_is_left_alone(client):
    answer = client.post("/api/echo", "hello", content_type="text/plain")
    assert (answer.status_code, answer.content) == (200, b"hello")


def test_the_batch_limit_follows_the_prefix():
    assert body_limit("/relay/api/v1/events/batch") == (
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    )
    assert body_limit("/api/v1/events/batch") == settings.MAX_EVENT_BYTES
