"""Signing schemes and Ed25519 key pairs (endpoints/signing_keys.py): the key
pair is a real one (checked by cryptography), made only when a scheme needs
it and kept after; v1a_verifies accepts exactly the v1a signature of the
request within the replay window."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from endpoints.signing_keys import (
    key_pair_generate,
    scheme_errors,
    signing_columns,
    v1a_verifies,
)

NOW = 1_700_000_000


def test_a_key_pair_is_a_32_byte_seed_and_its_own_public_key():
    private, public = key_pair_generate()
    seed = base64.b64decode(private.removeprefix("whsk_"), validate=True)
    raw = base64.b64decode(public.removeprefix("whpk_"), validate=True)

    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(b"m")

    Ed25519PublicKey.from_public_bytes(raw).verify(signature, b"m")
    assert (private[:5], public[:5], len(seed), len(raw)) == ("whsk_", "whpk_", 32, 32)
    assert key_pair_generate() != (private, public)


@pytest.mark.parametrize(
    ("value", "refused"),
    [("v1", False), ("v1a", False), ("both", False), (None, False)]
    + [(v, True) for v in ("", "v2", "V1A", "ed25519", 1)],
)
def test_scheme_errors(value, refused):
    assert bool(scheme_errors(value)) is refused


@pytest.mark.parametrize(
    ("scheme", "private_key", "made"),
    [
        ("v1", None, False),
        ("v1a", None, True),
        ("both", None, True),
        ("v1a", "whsk_kept", False),
        ("v1", "whsk_kept", False),
    ],
)
def test_a_key_pair_is_made_only_when_the_scheme_needs_one_and_has_none(
    scheme, private_key, made
):
    columns = signing_columns(scheme=scheme, private_key=private_key)

    assert columns["signing"] == scheme
    assert ("signing_private_key" in columns) is made


def test_no_scheme_given_changes_nothing():
    assert signing_columns(scheme=None, private_key=None) == {}


def request_signed(private: str, *, timestamp: int = NOW, body: bytes = b"{}"):
    seed = base64.b64decode(private.removeprefix("whsk_"))
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(
        f"msg_1.{timestamp}.".encode() + body
    )
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1,bm90IGl0 v1a," + base64.b64encode(signature).decode(),
    }


def test_v1a_verifies_its_own_signature_only():
    private, public = key_pair_generate()
    headers = request_signed(private)
    _, someone_else = key_pair_generate()

    assert v1a_verifies(public, body=b"{}", headers=headers, now=NOW)
    assert not v1a_verifies(public, body=b"{ }", headers=headers, now=NOW)
    assert not v1a_verifies(someone_else, body=b"{}", headers=headers, now=NOW)


def test_v1a_verifies_nothing_outside_the_replay_window_or_malformed():
    private, public = key_pair_generate()
    headers = request_signed(private)

    assert not v1a_verifies(public, body=b"{}", headers=headers, now=NOW + 301)
    assert not v1a_verifies(public, body=b"{}", headers={}, now=NOW)
    assert not v1a_verifies("whpk_short", body=b"{}", headers=headers, now=NOW)
