"""The default signing scheme: DEFAULT_SIGNING_SCHEME ("v1"), a merchant's own
(Merchant.signing, set by platform keys and staff), and a new endpoint taking
its merchant's, else the relay's, at creation only."""

from __future__ import annotations

import base64
import io

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import IntegrityError, transaction

from endpoints import signing_keys
from endpoints.merchant_services import merchant_update
from endpoints.models import Endpoint, Merchant
from endpoints.signing_default import setting_problems
from relayproject.lib.appsettings import DEFAULTS
from tests.support import factories
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.django_db
HOOK = "http://127.0.0.1:9/hook"


def create(api, **fields):
    return api.post("/merchants/acme/endpoints", {"url": HOOK, **fields})


def test_the_relays_default_is_v1(merchant, settings):
    assert DEFAULTS["DEFAULT_SIGNING_SCHEME"] == "v1"
    assert settings.DEFAULT_SIGNING_SCHEME == "v1"
    assert factories.endpoint(merchant).signing == "v1"


def test_the_relays_default_applies_to_a_merchant_without_its_own(
    any_key, merchant, settings
):
    settings.DEFAULT_SIGNING_SCHEME = "both"

    response = create(any_key)

    assert response.status_code == 201, response.content
    assert response.json()["signing"] == "both"


def test_a_merchants_v1a_default_makes_a_new_endpoint_v1a_with_its_key(
    any_key, merchant
):
    Merchant.objects.filter(pk=merchant.pk).update(signing="v1a")

    response = create(any_key)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["signing"] == "v1a"
    # A real Ed25519 public key, the endpoint's own.
    stored = Endpoint.objects.get(pk=body["id"])
    assert body["public_key"] == stored.signing_public_key
    raw = body["public_key"].removeprefix(signing_keys.PUBLIC_KEY_PREFIX)
    Ed25519PublicKey.from_public_bytes(base64.b64decode(raw))


def test_an_endpoints_own_scheme_wins_over_the_merchants(any_key, merchant, settings):
    settings.DEFAULT_SIGNING_SCHEME = "both"
    Merchant.objects.filter(pk=merchant.pk).update(signing="v1a")

    response = create(any_key, signing="v1")

    assert response.status_code == 201, response.content
    assert (response.json()["signing"], response.json()["public_key"]) == ("v1", None)


def test_a_merchants_default_wins_over_the_relays(merchant, settings):
    settings.DEFAULT_SIGNING_SCHEME = "both"
    Merchant.objects.filter(pk=merchant.pk).update(signing="v1")
    merchant.refresh_from_db()

    assert factories.endpoint(merchant).signing == "v1"


def test_platform_keys_set_clear_and_read_a_merchants_default(platform, merchant):
    response = platform.patch("/merchants/acme", {"signing": "both"})

    assert response.status_code == 200, response.content
    assert response.json()["signing"] == "both"
    assert Merchant.objects.get().signing == "both"
    assert platform.get("/merchants/acme").json()["signing"] == "both"

    response = platform.patch("/merchants/acme", {"signing": None})

    assert response.status_code == 200, response.content
    assert response.json()["signing"] is None
    assert Merchant.objects.get().signing is None


def test_another_value_is_a_422_naming_the_field_and_writes_nothing(platform, merchant):
    before = row_counts()

    response = platform.patch("/merchants/acme", {"signing": "v2", "name": "Renamed"})

    assert_problem(response, 422, ["body", "signing"])
    assert row_counts() == before
    assert (Merchant.objects.get().signing, Merchant.objects.get().name) == (
        None,
        merchant.name,
    )


def test_the_service_refuses_another_value_naming_the_field(merchant):
    with pytest.raises(ValidationError) as refused:
        merchant_update(merchant=merchant, signing="v2")

    assert set(refused.value.message_dict) == {"signing"}
    assert Merchant.objects.get().signing is None


def test_a_scoped_key_may_not_change_its_merchants_default(scoped, merchant):
    response = scoped.patch("/merchants/acme", {"signing": "v1a"})

    assert_problem(response, 403)
    assert Merchant.objects.get().signing is None


def test_changing_a_default_leaves_existing_endpoints_alone(
    platform, merchant, settings
):
    before = factories.endpoint(merchant)

    assert platform.patch("/merchants/acme", {"signing": "v1a"}).status_code == 200
    settings.DEFAULT_SIGNING_SCHEME = "both"

    before.refresh_from_db()
    assert (before.signing, before.signing_public_key) == ("v1", "")
    answer = platform.get(f"/merchants/acme/endpoints/{before.pk}").json()
    assert (answer["signing"], answer["public_key"]) == ("v1", None)
    # ...while a new one takes the merchant's default.
    assert create(platform).json()["signing"] == "v1a"


def test_the_database_refuses_a_merchant_scheme_that_is_none(merchant):
    with pytest.raises(IntegrityError), transaction.atomic():
        Merchant.objects.filter(pk=merchant.pk).update(signing="v2")


@pytest.mark.parametrize(
    ("value", "refused"),
    [("v1", False), ("v1a", False), ("both", False), ("v2", True), ("", True)],
)
def test_the_system_check_refuses_a_setting_that_is_no_scheme(settings, value, refused):
    settings.DEFAULT_SIGNING_SCHEME = value

    assert bool(setting_problems(value)) is refused
    if refused:
        with pytest.raises(SystemCheckError, match="endpoints.E003"):
            call_command("check")
    else:
        call_command("check", stdout=io.StringIO())
