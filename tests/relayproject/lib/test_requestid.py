"""500s are logged with the request id the response carries, and never the body."""

from __future__ import annotations

import logging

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import include, path

from relayproject.lib.logs import IdsFilter

SECRET_FIELD = "card-number-4111111111111111"


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("the portal broke")


urlpatterns = [path("boom/", boom), path("", include("relayproject.urls"))]


@pytest.fixture
def boom_urls(settings):
    settings.ROOT_URLCONF = __name__


@pytest.mark.django_db
def test_a_500_is_logged_with_the_request_id_and_without_the_body(boom_urls, caplog):
    client = Client(raise_request_exception=False)
    # The console handler's filter, which puts the bound ids on each line.
    caplog.handler.addFilter(IdsFilter())
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client.post("/boom/", {"field": SECRET_FIELD})

    assert response.status_code == 500
    request_id = response["X-Request-ID"]
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.request_id == request_id
    assert record.exc_info is not None
    assert SECRET_FIELD not in caplog.text


@pytest.mark.django_db
def test_every_answer_carries_a_fresh_id_unless_a_trusted_proxy_gave_one(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.2"]
    forged = Client().get("/healthz", HTTP_X_REQUEST_ID="forged-id-123456")
    assert forged["X-Request-ID"] != "forged-id-123456"
    proxied = Client().get(
        "/healthz", REMOTE_ADDR="10.0.0.2", HTTP_X_REQUEST_ID="lb-id-1234567890"
    )
    assert proxied["X-Request-ID"] == "lb-id-1234567890"
