"""Django's own errors on API paths are problems too; big bodies are never read."""

from __future__ import annotations

import io

import pytest
from django.core.wsgi import get_wsgi_application

from tests.support.api import PROBLEM, Api, assert_problem

pytestmark = pytest.mark.django_db


def test_unknown_api_path_is_a_problem_404():
    assert_problem(Api(None).get("/no-such-thing"), 404)


def test_wrong_method_is_a_problem_405_with_allow(platform):
    response = platform.call("PUT", "/events/batch", {"events": []})
    assert_problem(response, 405)
    assert "POST" in response["Allow"]


def test_non_api_paths_keep_djangos_pages(client):
    response = client.get("/no-such-page")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith(PROBLEM)


class ExplodingInput(io.RawIOBase):
    def read(self, size=-1):
        raise AssertionError("the body was read")

    readline = read


def test_oversized_body_is_refused_from_content_length_alone(settings):
    statuses = []
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/events",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": ExplodingInput(),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(settings.MAX_EVENT_BYTES + 1),
    }
    body = get_wsgi_application()(environ, lambda s, h: statuses.append((s, h)))
    assert statuses[0][0].startswith("413")
    assert dict(statuses[0][1])["Content-Type"] == PROBLEM
    assert b'"status": 413' in b"".join(body)


def test_healthz_answers_ok_when_the_database_does(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_the_interactive_docs_and_their_assets_are_served_locally(client):
    import re

    page = client.get("/api/v1/docs")
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.content.decode())

    assert page.status_code == 200
    assert assets
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
