"""API keys: hashed at rest, revocable, and the command that prints one."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from endpoints.apikeys import apikey_authenticate, apikey_create, apikey_revoke
from endpoints.models import ApiKey
from relayproject.lib.clock import utcnow

pytestmark = pytest.mark.django_db


def test_only_the_hash_and_a_short_prefix_are_stored():
    key, full_key = apikey_create(name="billing")
    assert full_key.startswith(key.prefix)
    assert full_key not in {key.prefix, key.key_hash}
    assert apikey_authenticate(full_key) == key


def test_revoked_key_no_longer_authenticates():
    key, full_key = apikey_create(name="billing")
    apikey_revoke(key=key)
    assert apikey_authenticate(full_key) is None


def test_last_used_is_written_at_most_once_a_minute():
    key, full_key = apikey_create(name="billing")
    t0 = utcnow()
    apikey_authenticate(full_key, now=t0)
    apikey_authenticate(full_key, now=t0 + timedelta(seconds=59))
    key.refresh_from_db()
    assert key.last_used_at == t0
    apikey_authenticate(full_key, now=t0 + timedelta(seconds=61))
    key.refresh_from_db()
    assert key.last_used_at == t0 + timedelta(seconds=61)


@pytest.mark.parametrize(
    ("args", "is_platform"), [([], True), (["--merchant", "acme"], False)]
)
def test_create_api_key_prints_the_key_alone_on_its_last_line(
    merchant, args, is_platform
):
    out = StringIO()
    call_command("create_api_key", "--name", "ci", *args, stdout=out)
    full_key = out.getvalue().strip().splitlines()[-1]
    key = apikey_authenticate(full_key)
    assert key is not None and key.name == "ci"
    assert key.is_platform is is_platform


def test_create_api_key_refuses_an_unknown_merchant():
    with pytest.raises(Exception, match="No merchant"):
        call_command("create_api_key", "--name", "ci", "--merchant", "nobody")
    assert not ApiKey.objects.exists()


def test_a_key_revoked_by_another_process_stops_within_the_cache_time(settings):
    settings.API_KEY_CACHE_SECONDS = 1
    key, full_key = apikey_create(name="billing")
    t0 = utcnow()
    assert apikey_authenticate(full_key, now=t0) == key
    # As another web process (or the admin on another host) revokes it.
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=t0)

    assert apikey_authenticate(full_key, now=t0 + timedelta(seconds=0.9)) == key
    assert apikey_authenticate(full_key, now=t0 + timedelta(seconds=1)) is None


def test_a_key_revoked_in_this_process_stops_at_once():
    key, full_key = apikey_create(name="billing")
    t0 = utcnow()
    apikey_authenticate(full_key, now=t0)
    apikey_revoke(key=key, now=t0)
    assert apikey_authenticate(full_key, now=t0) is None


def test_a_cached_key_costs_no_query(django_assert_num_queries):
    key, full_key = apikey_create(name="billing")
    t0 = utcnow()
    apikey_authenticate(full_key, now=t0)
    with django_assert_num_queries(0):
        assert apikey_authenticate(full_key, now=t0 + timedelta(seconds=0.5)) == key
