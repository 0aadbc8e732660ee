"""What a staff member reads in the endpoint page's credentials part: when a
certificate runs out, what a failed save asks to give again, and no box that
removes nothing."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from endpoints.client_credentials import tls_set
from tests.endpoints.admin.test_admin_credentials import page_of, post
from tests.support import client_certs, factories

pytestmark = pytest.mark.django_db


def test_a_certificate_near_its_end_says_how_long_is_left(admin_client):
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(days=5)
    identity = client_certs.identity("soon.example", not_after=soon)
    endpoint = factories.endpoint()
    tls_set(endpoint, {"client_cert": identity.chain, "client_key": identity.key})
    endpoint.save()

    html = admin_client.get(page_of(endpoint)).content.decode()

    assert "EXPIRING in about 5 days: upload a new one before then" in html


def test_after_an_error_typed_secrets_and_files_are_asked_for_again(admin_client):
    endpoint = factories.endpoint()

    response = post(
        admin_client,
        endpoint,
        set_auth_type="oauth2",
        set_token_url="https://127.0.0.1:8443/token",
        set_client_id="relay",
        set_client_secret="Look-Secret-Wren-2291",
        upload_client_cert=SimpleUploadedFile("chain.pem", b"not a certificate"),
    )

    assert response.status_code == 200
    fields = response.context["adminform"].form.fields
    assert fields["set_client_secret"].help_text.startswith("Not saved: type it")
    assert fields["upload_client_cert"].help_text.startswith("Not saved: choose")


def test_no_remove_box_when_nothing_is_set(admin_client):
    html = admin_client.get(page_of(factories.endpoint())).content.decode()

    assert 'name="set_auth_type"' in html
    assert 'name="remove_client_cert"' not in html
    assert 'name="remove_ca_bundle"' not in html
