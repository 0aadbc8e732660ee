"""The `signing` field through the API (v1, v1a, both), the public key an answer
carries, and the key set published at /merchants/{slug}/signing-keys without
an API key. The private key is never in an answer."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from endpoints.models import Endpoint
from tests.support import factories
from tests.support.api import Api, assert_problem, row_counts

pytestmark = pytest.mark.django_db
HOOK = "http://127.0.0.1:9/hook"


def create(api, **fields):
    return api.post("/merchants/acme/endpoints", {"url": HOOK, **fields})


def private_key_of(endpoint_id: str) -> str:
    return Endpoint.objects.get(pk=endpoint_id).signing_private_key


def raw_public_key(public_key: str) -> bytes:
    assert public_key.startswith("whpk_")
    return Ed25519PublicKey.from_public_bytes(
        base64.b64decode(public_key.removeprefix("whpk_"))
    ).public_bytes_raw()


def test_a_new_endpoint_signs_with_v1_and_has_no_public_key(any_key):
    response = create(any_key)

    assert response.status_code == 201
    assert response.json()["signing"] == "v1"
    assert response.json()["public_key"] is None
    assert private_key_of(response.json()["id"]) is None


@pytest.mark.parametrize("scheme", ["v1a", "both"])
def test_v1a_and_both_answer_with_a_32_byte_ed25519_public_key(any_key, scheme):
    response = create(any_key, signing=scheme)

    assert response.status_code == 201
    body = response.json()
    assert body["signing"] == scheme
    assert len(raw_public_key(body["public_key"])) == 32


def test_changing_to_v1a_makes_a_key_pair_and_back_to_v1_keeps_it(any_key):
    endpoint_id = create(any_key).json()["id"]
    path = f"/merchants/acme/endpoints/{endpoint_id}"

    switched_on = any_key.patch(path, {"signing": "v1a"}).json()
    switched_off = any_key.patch(path, {"signing": "v1"}).json()
    back_on = any_key.patch(path, {"signing": "both"}).json()

    assert switched_on["public_key"].startswith("whpk_")
    assert switched_off["public_key"] is None
    # A receiver that pinned the key keeps verifying when the endpoint returns.
    assert back_on["public_key"] == switched_on["public_key"]


@pytest.mark.parametrize("value", ["v2", "V1A", "", "ed25519"])
def test_an_unknown_signing_value_is_a_422_naming_the_field(any_key, value):
    before = row_counts()

    response = create(any_key, signing=value)

    assert_problem(response, 422, ["body", "signing"])
    assert row_counts() == before


def test_a_patch_with_an_unknown_signing_value_is_a_422_and_changes_nothing(
    any_key, merchant
):
    endpoint = factories.endpoint(merchant)

    response = any_key.patch(
        f"/merchants/acme/endpoints/{endpoint.pk}", {"signing": "v3"}
    )

    assert_problem(response, 422, ["body", "signing"])
    endpoint.refresh_from_db()
    assert (endpoint.signing, endpoint.signing_private_key) == ("v1", None)


def test_the_private_key_is_in_no_answer(any_key):
    created = create(any_key, signing="both")
    endpoint_id = created.json()["id"]
    private = private_key_of(endpoint_id).removeprefix("whsk_")
    path = f"/merchants/acme/endpoints/{endpoint_id}"

    answers = [
        created,
        any_key.get(path),
        any_key.get("/merchants/acme/endpoints"),
        any_key.patch(path, {"description": "changed"}),
        Api(None).get("/merchants/acme/signing-keys"),
    ]

    assert all(a.status_code in (200, 201) for a in answers)
    for answer in answers:
        assert private not in answer.content.decode()


def test_the_key_set_lists_only_v1a_keys_of_that_merchant_without_a_key(
    merchant, other_merchant
):
    v1a = factories.endpoint(merchant, signing="v1a")
    both = factories.endpoint(merchant, signing="both")
    factories.endpoint(merchant)  # v1: no key to list
    factories.endpoint(other_merchant, signing="v1a")

    response = Api(None).get("/merchants/acme/signing-keys")

    assert response.status_code == 200
    assert response.json() == {
        "keys": [
            {"endpoint_id": v1a.pk, "public_key": v1a.signing_public_key},
            {"endpoint_id": both.pk, "public_key": both.signing_public_key},
        ]
    }


def test_the_key_set_of_a_merchant_with_no_v1a_endpoint_is_empty(merchant):
    factories.endpoint(merchant)

    response = Api(None).get("/merchants/acme/signing-keys")

    assert response.json() == {"keys": []}


def test_the_key_set_of_an_unknown_merchant_is_a_404(merchant):
    assert_problem(Api(None).get("/merchants/nobody/signing-keys"), 404)


def test_the_key_set_ignores_a_bad_api_key(merchant):
    """No key is needed, so a wrong one is no reason to refuse."""
    factories.endpoint(merchant, signing="v1a")

    response = Api("not-a-key").get("/merchants/acme/signing-keys")

    assert response.status_code == 200
    assert len(response.json()["keys"]) == 1
