"""Schemathesis against /api/v1/openapi.json, in-process over WSGI.

Bounded (a few examples per operation) so it stays a test, not a fuzzing run;
it must find no 5xx and no answer that breaks the documented schema.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests import factories

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture
def platform_key(db):
    from endpoints.services import apikey_create

    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    return apikey_create(name="schemathesis")[1]


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms_to_its_openapi_document(case, platform_key):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {platform_key}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
