"""An endpoint's Ed25519 private key is encrypted at rest and re-encrypted
with the new key on rotation, as signing secrets are."""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from endpoints.models import Endpoint
from tests.support import factories

pytestmark = pytest.mark.django_db


def stored(endpoint) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT signing_private_key FROM endpoints_endpoint WHERE id = %s",
            [endpoint.pk],
        )
        return cursor.fetchone()[0]


def test_the_column_holds_a_token_not_the_key(settings):
    endpoint = factories.endpoint(signing="v1a")

    column = stored(endpoint)

    assert endpoint.signing_private_key.startswith("whsk_")
    assert endpoint.signing_private_key.removeprefix("whsk_") not in column
    assert Fernet(settings.RELAY_ENCRYPTION_KEYS[0]).decrypt(column.encode())


def test_reencrypt_secrets_moves_private_keys_to_the_new_key(settings):
    old_key, new_key = settings.RELAY_ENCRYPTION_KEYS[0], Fernet.generate_key().decode()
    endpoint = factories.endpoint(signing="both")
    factories.endpoint(merchant_obj=endpoint.merchant)  # v1: nothing to do
    private = endpoint.signing_private_key

    settings.RELAY_ENCRYPTION_KEYS = [new_key, old_key]
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    settings.RELAY_ENCRYPTION_KEYS = [new_key]  # the old key is gone now

    assert Endpoint.objects.get(pk=endpoint.pk).signing_private_key == private
    assert "Re-encrypted the Ed25519 private keys of 1 endpoint(s)." in out.getvalue()
