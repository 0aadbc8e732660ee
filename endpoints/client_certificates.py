"""Client certificates and CA bundles as a merchant gives them (pure checks).

Reads a PEM chain and key, or a PKCS#12 file, with `cryptography`, and
returns what may be stored: the certificates written out again as PEM (so
nothing but certificates reaches the clear column, whatever else was
pasted beside them) and the key as unencrypted PKCS#8 PEM (the column it
goes to is encrypted). No message here repeats any part of what was given:
a key, a password or a PKCS#12 file must never reach a log or an answer.
No Django imports: this module loads and is tested without settings.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

from endpoints import pkcs12_work

CHAIN_MAX_BYTES = 64 * 1024
KEY_MAX_BYTES = 16 * 1024
BUNDLE_MAX_BYTES = 256 * 1024
PKCS12_MAX_BYTES = 96 * 1024  # the file itself; its base64 is a third longer
PASSWORD_MAX_CHARS = 1000
CHAIN_MAX_CERTS = 10
BUNDLE_MAX_CERTS = 200
SUBJECT_MAX_CHARS = 500  # Endpoint.tls_subject

# Keys a TLS client can sign its CertificateVerify with.
USABLE_KEYS = (
    rsa.RSAPrivateKey,
    ec.EllipticCurvePrivateKey,
    ed25519.Ed25519PrivateKey,
    ed448.Ed448PrivateKey,
)
# Every TLS handshake signs with the key on a dispatcher's event loop: a
# 16,000-bit RSA key (it fits in KEY_MAX_BYTES) costs ~200 ms a signature.
RSA_MIN_BITS = 2048
RSA_MAX_BITS = 4096
EC_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)
_BLOCK_RE = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")
_KEY_LABELS = {b"PRIVATE KEY", b"RSA PRIVATE KEY", b"EC PRIVATE KEY"}

Problems = list[tuple[str, str]]  # (the field at fault, a message)


@dataclass(frozen=True)
class ClientIdentity:
    """A checked certificate chain (leaf first) and the key that matches its leaf."""

    chain_pem: str
    key_pem: str = field(repr=False)
    subject: str
    not_after: datetime


def identity_from_pem(
    chain: object, key: object
) -> tuple[ClientIdentity | None, Problems]:
    """A client identity from a PEM chain ("client_cert") and key ("client_key")."""
    problems: Problems = []
    certificates = _certificates(
        chain, name="client_cert", max_bytes=CHAIN_MAX_BYTES, max_certs=CHAIN_MAX_CERTS
    )
    if isinstance(certificates, str):
        problems.append(("client_cert", certificates))
    private_key = _pem_key(key)
    if isinstance(private_key, str):
        problems.append(("client_key", private_key))
    if problems:
        return None, problems
    return _identity(certificates, private_key, key_field="client_key")  # type: ignore[arg-type]


def identity_from_pkcs12(
    data: object, password: object
) -> tuple[ClientIdentity | None, Problems]:
    """A client identity from a base64 PKCS#12 file ("pkcs12") and its password."""
    if password is not None and (
        not isinstance(password, str) or len(password) > PASSWORD_MAX_CHARS
    ):
        return None, [
            ("password", f"A string of at most {PASSWORD_MAX_CHARS} characters.")
        ]
    if not isinstance(data, str) or not data.strip():
        return None, [("pkcs12", "The PKCS#12 file (.p12, .pfx) in base64.")]
    if len(data) > PKCS12_MAX_BYTES * 4 // 3 + 8:
        return None, [("pkcs12", f"At most {PKCS12_MAX_BYTES // 1024} KiB.")]
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return None, [("pkcs12", "Not base64: give the PKCS#12 file in base64.")]
    # Read before it is opened: the file names its own key-derivation work.
    try:
        work = pkcs12_work.total_iterations(raw)
    except pkcs12_work.Unreadable:
        return None, [("pkcs12", "Could not read the file: it is not a PKCS#12 file.")]
    if work > pkcs12_work.MAX_TOTAL_ITERATIONS:
        return None, [
            (
                "pkcs12",
                f"The file asks for more than {pkcs12_work.MAX_TOTAL_ITERATIONS:,} "
                "key-derivation iterations in all; export it again with your "
                "tool's default settings.",
            )
        ]
    secret = password.encode() if password else None
    try:
        key, leaf, extra = pkcs12.load_key_and_certificates(raw, secret)
    except (ValueError, TypeError):
        # OpenSSL says the same for both; so must we.
        return None, [
            (
                "pkcs12",
                "Could not open the PKCS#12 file: the password is wrong, or it "
                "is not a PKCS#12 file.",
            )
        ]
    if key is None or leaf is None:
        return None, [
            ("pkcs12", "The PKCS#12 file must hold a certificate and its private key.")
        ]
    if 1 + len(extra) > CHAIN_MAX_CERTS:
        return None, [("pkcs12", f"At most {CHAIN_MAX_CERTS} certificates.")]
    if not isinstance(key, USABLE_KEYS):
        return None, [("pkcs12", _UNUSABLE_KEY)]
    if problem := key_size_problem(key):
        return None, [("pkcs12", problem)]
    return _identity([leaf, *extra], key, key_field="pkcs12")


def ca_bundle_from_pem(bundle: object) -> tuple[str | None, Problems]:
    """The CA certificates as PEM again, or why not ("ca_bundle")."""
    certificates = _certificates(
        bundle, name="ca_bundle", max_bytes=BUNDLE_MAX_BYTES, max_certs=BUNDLE_MAX_CERTS
    )
    if isinstance(certificates, str):
        return None, [("ca_bundle", certificates)]
    return _pem_of(certificates), []


def _identity(
    certificates: list[x509.Certificate], key, *, key_field: str
) -> tuple[ClientIdentity | None, Problems]:
    leaf = certificates[0]
    if _public(key.public_key()) != _public(leaf.public_key()):
        matching = [
            c
            for c in certificates[1:]
            if _public(c.public_key()) == _public(key.public_key())
        ]
        if matching:
            return None, [
                (
                    "client_cert",
                    "The key matches a later certificate of the chain: put the "
                    "client's own certificate (the leaf) first.",
                )
            ]
        return None, [(key_field, "The private key does not match the certificate.")]
    if problem := _client_auth_problem(leaf):
        return None, [
            ("client_cert" if key_field == "client_key" else key_field, problem)
        ]
    subject = leaf.subject.rfc4514_string()
    if len(subject) > SUBJECT_MAX_CHARS:
        subject = subject[: SUBJECT_MAX_CHARS - 1] + "…"
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")
    return (
        ClientIdentity(
            chain_pem=_pem_of(certificates),
            key_pem=key_pem,
            subject=subject,
            not_after=leaf.not_valid_after_utc,
        ),
        [],
    )


def _client_auth_problem(leaf: x509.Certificate) -> str | None:
    """Why a receiver would refuse this leaf as a client certificate (RFC 5280
    4.2.1.12: an extendedKeyUsage limits what the certificate is for)."""
    try:
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return None
    if ExtendedKeyUsageOID.CLIENT_AUTH in usages:
        return None
    if ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages:
        return None
    return (
        "The certificate's extended key usage does not include client "
        "authentication (clientAuth): receivers would refuse it."
    )


def _certificates(
    text: object, *, name: str, max_bytes: int, max_certs: int
) -> list[x509.Certificate] | str:
    """The certificates of a PEM text, or a message saying why not."""
    if not isinstance(text, str) or not text.strip():
        return "PEM certificates (-----BEGIN CERTIFICATE-----)."
    data = text.encode("utf-8", "replace")
    if len(data) > max_bytes:
        return f"At most {max_bytes // 1024} KiB."
    labels = _BLOCK_RE.findall(data)
    if any(label != b"CERTIFICATE" for label in labels):
        # A key pasted beside the certificates would be stored in clear.
        return (
            "Only certificates (-----BEGIN CERTIFICATE-----) belong here; "
            "remove every other block (a private key goes in client_key)."
            if name == "client_cert"
            else "Only certificates (-----BEGIN CERTIFICATE-----) belong here; "
            "remove every other block."
        )
    if len(labels) > max_certs:
        return f"At most {max_certs} certificates; {len(labels)} given."
    try:
        certificates = x509.load_pem_x509_certificates(data)
    except ValueError:
        return "Not PEM certificates: one of them does not parse."
    return certificates


def _pem_key(text: object):
    """The private key of a PEM text, or a message saying why not."""
    if not isinstance(text, str) or not text.strip():
        return "The private key in PEM (-----BEGIN PRIVATE KEY-----)."
    data = text.encode("utf-8", "replace")
    if len(data) > KEY_MAX_BYTES:
        return f"At most {KEY_MAX_BYTES // 1024} KiB."
    labels = _BLOCK_RE.findall(data)
    if b"ENCRYPTED PRIVATE KEY" in labels or b"Proc-Type: 4,ENCRYPTED" in data:
        return _ENCRYPTED_KEY
    if len(labels) != 1 or labels[0] not in _KEY_LABELS:
        return "One private key in PEM (-----BEGIN PRIVATE KEY-----), nothing else."
    try:
        # Its size first: checking an RSA key's primes takes seconds for the
        # sizes refused below, so only a key of an accepted size is checked.
        key = serialization.load_pem_private_key(
            data, password=None, unsafe_skip_rsa_key_validation=True
        )
        if not isinstance(key, USABLE_KEYS):
            return _UNUSABLE_KEY
        if problem := key_size_problem(key):
            return problem
        if isinstance(key, rsa.RSAPrivateKey):
            key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # encrypted in a form the labels did not show
        return _ENCRYPTED_KEY
    except (ValueError, UnsupportedAlgorithm):
        return (
            "Not a private key this relay can read (RSA, EC, Ed25519 or Ed448, in PEM)."
        )
    return key


def key_size_problem(key) -> str | None:
    """Why the relay refuses a usable key's size or curve (None: it takes it)."""
    if isinstance(key, rsa.RSAPrivateKey) and not (
        RSA_MIN_BITS <= key.key_size <= RSA_MAX_BITS
    ):
        return (
            f"The RSA key has {key.key_size:,} bits: the relay takes "
            f"{RSA_MIN_BITS:,} to {RSA_MAX_BITS:,} bits (every TLS handshake "
            "signs with it)."
        )
    if isinstance(key, ec.EllipticCurvePrivateKey) and not isinstance(
        key.curve, EC_CURVES
    ):
        return (
            f"The EC key is on the curve {key.curve.name}: the relay takes "
            "P-256, P-384 or P-521."
        )
    return None


def _public(public_key) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _pem_of(certificates: list[x509.Certificate]) -> str:
    return "".join(
        c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certificates
    )


_ENCRYPTED_KEY = (
    "The private key is encrypted with a passphrase: give it unencrypted "
    "(openssl pkey -in key.pem -out plain.pem), or send a PKCS#12 file with its "
    "password. The relay keeps it encrypted at rest."
)
_UNUSABLE_KEY = "Only an RSA, EC, Ed25519 or Ed448 key can sign a TLS handshake."
