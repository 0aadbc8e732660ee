"""Signing secrets are encrypted at rest; rotating the encryption key keeps deliveries verifying."""

from __future__ import annotations

import importlib
import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.jobs import jobs_load
from deliveries.models import Delivery
from deliveries.services import event_publish
from endpoints import secret_storage
from endpoints.models import EndpointSecret
from endpoints.secret_rotation import endpoint_rotate_secret
from relayproject.lib.clock import utcnow
from tests.deliveries.dispatch.test_dispatcher import make_dispatcher
from tests.support import factories
from tests.support.api import api_as


def dump() -> list[tuple]:
    """What a database dump of the secrets table holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM endpoints_endpointsecret")
        return cursor.fetchall()


def deliver_once() -> None:
    make_dispatcher().run(drain=True)


@pytest.mark.django_db
def test_a_dump_of_the_secrets_table_holds_no_secret():
    merchant = factories.merchant("acme")
    created = api_as(None).post(
        "/merchants/acme/endpoints", {"url": "http://127.0.0.1:9/hook"}
    )
    secret = created.json()["secret"]
    endpoint_rotate_secret(endpoint=merchant.endpoints.get(), now=utcnow())
    plain = [s.secret for s in EndpointSecret.objects.all()]
    assert secret in plain and len(plain) == 2

    text = repr(dump())
    assert "whsec_" not in text
    for value in plain:
        assert value.removeprefix("whsec_") not in text  # nor the raw key


@pytest.mark.django_db(transaction=True)
def test_deliveries_verify_before_and_after_rotating_the_encryption_key(
    receiver, settings
):
    old_key, new_key = settings.RELAY_ENCRYPTION_KEYS[0], Fernet.generate_key().decode()
    endpoint = factories.endpoint(url=receiver.url)
    secret = EndpointSecret.objects.get().secret
    event_publish(merchant=endpoint.merchant, type="order.paid", data={"n": 1})
    deliver_once()
    before = dump()

    settings.RELAY_ENCRYPTION_KEYS = [new_key, old_key]
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    assert "Re-encrypted 1 endpoint secret" in out.getvalue()
    settings.RELAY_ENCRYPTION_KEYS = [new_key]  # the old key is gone now
    event_publish(merchant=endpoint.merchant, type="order.paid", data={"n": 2})
    deliver_once()

    assert dump() != before
    got = receiver.wait_for(2)
    assert sorted(
        Webhook(secret).verify(r.body, r.headers)["data"]["n"] for r in got
    ) == [1, 2]
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}


@pytest.mark.django_db
def test_without_its_key_a_secret_is_an_error_not_garbage(settings):
    factories.endpoint()
    settings.RELAY_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(secret_storage.SecretDecryptionError):
        EndpointSecret.objects.get()


@pytest.mark.django_db
def test_the_migration_encrypts_secrets_stored_in_clear():
    migration = importlib.import_module(
        "endpoints.migrations.0003_encrypt_endpoint_secrets"
    )
    factories.endpoint()
    row = EndpointSecret.objects.get()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE endpoints_endpointsecret SET secret = %s WHERE id = %s",
            ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", row.pk],
        )

    class Editor:
        pass

    editor = Editor()
    editor.connection = connection
    migration.encrypt_plain(None, editor)
    migration.encrypt_plain(None, editor)  # a second run changes nothing

    assert "whsec_" not in repr(dump())
    assert (
        EndpointSecret.objects.get().secret == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    )


@pytest.mark.django_db
def test_the_signing_path_decrypts_once_per_batch_not_per_delivery(monkeypatch):
    endpoint = factories.endpoint()
    for n in range(20):
        event_publish(merchant=endpoint.merchant, type="a.b", data={"n": n})
    decrypted = []
    real = secret_storage.decrypt
    monkeypatch.setattr(
        secret_storage, "decrypt", lambda token: decrypted.append(1) or real(token)
    )
    now = utcnow()
    lease = now
    Delivery.objects.update(claimed_until=lease)

    jobs = jobs_load(
        delivery_ids=list(Delivery.objects.values_list("pk", flat=True)),
        lease_until=lease,
        probe_ids=set(),
        now=now,
    )

    assert len(jobs) == 20
    assert len(decrypted) == 1
