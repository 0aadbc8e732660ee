"""Client keys a dispatcher can sign handshakes with cheaply (issue 42
review): RSA of 2048 to 4096 bits, EC on P-256, P-384 or P-521, Ed25519 and
Ed448; anything else is refused at save, at the key's field, as PEM and as
PKCS#12 alike."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from endpoints.client_certificates import identity_from_pem, identity_from_pkcs12

ACCEPTED = {
    "rsa-2048": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "ec-p256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "ec-p384": lambda: ec.generate_private_key(ec.SECP384R1()),
    "ec-p521": lambda: ec.generate_private_key(ec.SECP521R1()),
    "ed25519": ed25519.Ed25519PrivateKey.generate,
    "ed448": ed448.Ed448PrivateKey.generate,
}
REFUSED = {
    # Just past each bound: a far larger key only takes longer to make.
    "rsa-1024": (
        lambda: rsa.generate_private_key(public_exponent=65537, key_size=1024),
        "The RSA key has 1,024 bits: the relay takes 2,048 to 4,096 bits "
        "(every TLS handshake signs with it).",
    ),
    "rsa-4160": (
        lambda: rsa.generate_private_key(public_exponent=65537, key_size=4160),
        "The RSA key has 4,160 bits: the relay takes 2,048 to 4,096 bits "
        "(every TLS handshake signs with it).",
    ),
    "ec-secp256k1": (
        lambda: ec.generate_private_key(ec.SECP256K1()),
        "The EC key is on the curve secp256k1: the relay takes P-256, P-384 or P-521.",
    ),
}


def self_signed(key) -> tuple[str, str]:
    """(certificate PEM, key PEM) of a self-signed client certificate for key."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "size.example")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .sign(key, _digest_for(key))
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return (
        certificate.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem.decode(),
    )


def _digest_for(key):
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return None
    return hashes.SHA256()


def as_pkcs12(key, certificate_pem: str) -> str:
    certificate = x509.load_pem_x509_certificate(certificate_pem.encode())
    raw = pkcs12.serialize_key_and_certificates(
        b"client", key, certificate, None, serialization.BestAvailableEncryption(b"pw")
    )
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_a_key_of_an_accepted_kind_and_size_is_taken(name):
    key = ACCEPTED[name]()
    chain, key_pem = self_signed(key)

    from_pem, pem_problems = identity_from_pem(chain, key_pem)
    from_p12, p12_problems = identity_from_pkcs12(as_pkcs12(key, chain), "pw")

    assert (pem_problems, p12_problems) == ([], [])
    assert from_pem is not None and from_p12 is not None


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_pem_key_of_another_size_or_curve_is_refused_at_client_key(name):
    make, message = REFUSED[name]
    chain, key_pem = self_signed(make())

    found, problems = identity_from_pem(chain, key_pem)

    assert found is None
    assert problems == [("client_key", message)]


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_pkcs12_key_of_another_size_or_curve_is_refused_at_pkcs12(name):
    make, message = REFUSED[name]
    key = make()
    chain, _ = self_signed(key)

    found, problems = identity_from_pkcs12(as_pkcs12(key, chain), "pw")

    assert found is None
    assert problems == [("pkcs12", message)]
