"""The cached policy header is, byte for byte, the one django-csp builds."""

from __future__ import annotations

import pytest
from csp.constants import HEADER, HEADER_REPORT_ONLY, NONCE, SELF
from csp.middleware import CSPMiddleware as Original
from django.http import HttpResponse
from django.test import RequestFactory

from relayproject.lib.cspheader import CSPMiddleware


def answer(middleware_class, *, path="/api/v1/events", **response_attrs):
    request = RequestFactory().get(path)
    middleware = middleware_class(lambda _request: None)
    middleware.process_request(request)
    response = HttpResponse("ok")
    for name, value in response_attrs.items():
        setattr(response, name, value)
    return request, middleware.process_response(request, response)


def headers(response) -> dict[str, str | None]:
    return {h: response.get(h) for h in (HEADER, HEADER_REPORT_ONLY)}


def test_a_plain_answer_gets_the_policy_django_csp_builds():
    _, cached = answer(CSPMiddleware)
    _, built = answer(Original)
    assert headers(cached) == headers(built)
    assert "default-src 'self'" in cached[HEADER]


@pytest.mark.parametrize(
    "attrs",
    [
        {"_csp_update": {"img-src": ["https://cdn.example"]}},
        {"_csp_replace": {"script-src": ["https://cdn.example"]}},
        {"_csp_exempt": True},
    ],
    ids=["update", "replace", "exempt"],
)
def test_an_answer_with_its_own_policy_gets_that_one(attrs):
    _, cached = answer(CSPMiddleware, **attrs)
    _, built = answer(Original, **attrs)
    assert headers(cached) == headers(built)


def test_a_nonce_taken_before_the_answer_is_in_its_policy(settings):
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"script-src": [SELF, NONCE]}}
    request = RequestFactory().get("/portal/")
    middleware = CSPMiddleware(lambda _request: None)
    middleware.process_request(request)
    nonce = str(request.csp_nonce)
    response = middleware.process_response(request, HttpResponse("ok"))
    assert f"'nonce-{nonce}'" in response[HEADER]


def test_a_changed_setting_is_the_next_answers_policy(settings):
    answer(CSPMiddleware)  # cached
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": [SELF, "x.test"]}}
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = {
        "EXCLUDE_URL_PREFIXES": ["/healthz"],
        "DIRECTIVES": {"default-src": [SELF]},
    }
    _, cached = answer(CSPMiddleware)
    _, built = answer(Original)
    assert headers(cached) == headers(built)
    assert cached[HEADER] == "default-src 'self' x.test"
    _, excluded = answer(CSPMiddleware, path="/healthz")
    assert excluded.get(HEADER_REPORT_ONLY) is None


def test_asking_for_a_nonce_after_the_header_is_written_raises():
    request, _ = answer(CSPMiddleware)
    with pytest.raises(Exception, match="not available after the CSP header"):
        str(request.csp_nonce)
