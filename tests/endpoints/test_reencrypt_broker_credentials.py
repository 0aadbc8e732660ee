"""A broker URL's credentials are re-encrypted with the new key on rotation,
as signing secrets are: once the old key is gone, they still decrypt."""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from endpoints.models import Endpoint
from tests.support import factories

pytestmark = pytest.mark.django_db

PASSWORD = "Plum-Quokka-7731-zebra"


def test_reencrypt_secrets_moves_broker_credentials_to_the_new_key(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    old_key, new_key = settings.RELAY_ENCRYPTION_KEYS[0], Fernet.generate_key().decode()
    endpoint = factories.endpoint(
        kind="redis",
        url=f"redis://:{PASSWORD}@127.0.0.1:6379/0",
        target={"stream": "orders"},
    )
    factories.endpoint(merchant_obj=endpoint.merchant)  # http: nothing to do

    settings.RELAY_ENCRYPTION_KEYS = [new_key, old_key]
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    settings.RELAY_ENCRYPTION_KEYS = [new_key]  # the old key is gone now

    assert Endpoint.objects.get(pk=endpoint.pk).broker_credentials == f":{PASSWORD}"
    assert "Re-encrypted the broker credentials of 1 endpoint(s)." in out.getvalue()
