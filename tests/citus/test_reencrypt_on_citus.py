"""`manage.py reencrypt_secrets` on Citus: every merchant's secrets and header
values, on every shard, re-encrypted with the new first key.

Secrets and endpoints are distributed by merchant; the command locks its
batches, and Citus locks rows only in a statement that names one shard.
The single-merchant rotation test of tests/endpoints runs here as it is, with
deliveries signed before and after; the one below spreads the rows over
merchants on different shards.
"""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from endpoints.models import Endpoint, EndpointSecret
from endpoints.secret_rotation import endpoint_rotate_secret
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.endpoints.test_secret_storage import (
    test_deliveries_verify_before_and_after_rotating_the_encryption_key,
)
from tests.support import factories

pytestmark = [pytest.mark.citus, pytest.mark.django_db(transaction=True)]

__all__ = ["test_deliveries_verify_before_and_after_rotating_the_encryption_key"]

HEADERS = {"Authorization": "Bearer tok-9c2e4f1d-value"}


def _shards() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(DISTINCT get_shard_id_for_distribution_column("
            "'endpoints_endpointsecret', merchant_id)) FROM endpoints_endpointsecret"
        )
        return cursor.fetchone()[0]


def _stored() -> list[tuple]:
    """What a dump of the two encrypted columns holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.id::text, s.secret FROM endpoints_endpointsecret s "
            "UNION ALL SELECT e.id, e.headers::text FROM endpoints_endpoint e "
            "ORDER BY 1"
        )
        return cursor.fetchall()


def test_reencrypt_secrets_rewrites_every_merchants_rows_on_every_shard(
    distributed, settings
):
    endpoints = [factories.endpoint() for _ in range(6)]
    for endpoint in endpoints:
        endpoint_rotate_secret(endpoint=endpoint, now=utcnow())  # two secrets each
    for endpoint in endpoints[:4]:
        endpoint_update(endpoint=endpoint, headers=HEADERS, now=utcnow())
    assert _shards() > 1, "the merchants' rows lie on more than one shard"
    plain = {s.pk: s.secret for s in EndpointSecret.objects.all()}
    before = dict(_stored())
    old_key, new_key = settings.RELAY_ENCRYPTION_KEYS[0], Fernet.generate_key().decode()

    settings.RELAY_ENCRYPTION_KEYS = [new_key, old_key]
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)

    assert "Re-encrypted 12 endpoint secret(s)." in out.getvalue()
    assert "custom header values of 4 endpoint(s)." in out.getvalue()
    after = dict(_stored())
    assert after.keys() == before.keys()
    changed = [k for k in after if after[k] != before[k]]
    assert len(changed) == 12 + 4, "every secret and every header value rewritten"
    settings.RELAY_ENCRYPTION_KEYS = [new_key]  # the old key is gone now
    assert {s.pk: s.secret for s in EndpointSecret.objects.all()} == plain
    with_headers = Endpoint.objects.exclude(headers={}).order_by("pk")
    assert [e.headers for e in with_headers] == [HEADERS] * 4
