"""Schemathesis against /api/v1/openapi.json, in-process over WSGI.

Bounded (a few examples per operation) so it stays a test, not a fuzzing run;
it must find no 5xx and no answer that breaks the documented schema.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from endpoints.apikeys import apikey_create
from tests.support import factories

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture
def platform_key(db):
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    return apikey_create(name="schemathesis")[1]


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    # As django.test.Client does: the raw WSGI app would otherwise close the
    # connection that holds the test transaction at the end of each request.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("SCHEMATHESIS_EXAMPLES", "15")),
    derandomize=not os.environ.get("SCHEMATHESIS_EXAMPLES"),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms_to_its_openapi_document(case, platform_key):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {platform_key}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
