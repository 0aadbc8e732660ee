"""Real client certificates for tests of endpoint tls (trustme, cryptography)."""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Identity:
    chain: str  # PEM, leaf first
    key: str  # PEM, unencrypted
    ca: str  # the root CA's PEM

    def pkcs12(self, password: str | None) -> str:
        """The same identity as a base64 PKCS#12 file."""
        certificates = x509.load_pem_x509_certificates(self.chain.encode())
        key = serialization.load_pem_private_key(self.key.encode(), None)
        encryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        data = pkcs12.serialize_key_and_certificates(
            b"client", key, certificates[0], certificates[1:] or None, encryption
        )
        return base64.b64encode(data).decode("ascii")

    def encrypted_key(self, passphrase: str) -> str:
        key = serialization.load_pem_private_key(self.key.encode(), None)
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(passphrase.encode()),
        ).decode("ascii")


def identity(
    common_name: str = "client.example",
    *,
    not_after: dt.datetime | None = None,
    not_before: dt.datetime | None = None,
) -> Identity:
    """A leaf and its intermediate CA (the chain), under a fresh trustme root."""
    ca = trustme.CA()
    leaf = ca.create_child_ca().issue_cert(
        common_name, common_name=common_name, not_after=not_after, not_before=not_before
    )
    return Identity(
        chain="".join(blob.bytes().decode() for blob in leaf.cert_chain_pems),
        key=leaf.private_key_pem.bytes().decode(),
        ca=ca.cert_pem.bytes().decode(),
    )


def self_signed(*, usages: list[x509.ObjectIdentifier] | None) -> Identity:
    """A self-signed certificate with exactly these extended key usages (None:
    no extendedKeyUsage extension at all)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "self.example")])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
    )
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    certificate = builder.sign(key, hashes.SHA256())
    pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return Identity(chain=pem, key=key_pem, ca=pem)


SERVER_ONLY = [ExtendedKeyUsageOID.SERVER_AUTH]


def key_body(pem: str) -> str:
    """The base64 lines of a PEM block: what must never appear in any output."""
    lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    return "".join(lines)
