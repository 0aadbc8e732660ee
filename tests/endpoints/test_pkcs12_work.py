"""A PKCS#12 upload cannot hold a web worker in key derivation: the
iteration counts it names are read, and summed, before it is opened
(endpoints/pkcs12_work.py)."""

from __future__ import annotations

import base64
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from endpoints import pkcs12_work
from endpoints.client_certificates import identity_from_pkcs12
from tests.support import client_certs


@pytest.fixture(scope="module")
def identity():
    return client_certs.identity()


def _pkcs12(identity, *, rounds: int | None, password: bytes = b"pw") -> bytes:
    certificates = x509.load_pem_x509_certificates(identity.chain.encode())
    key = serialization.load_pem_private_key(identity.key.encode(), None)
    if rounds is None:
        encryption = serialization.BestAvailableEncryption(password)
    else:
        encryption = (
            serialization.PrivateFormat.PKCS12.encryption_builder()
            .kdf_rounds(rounds)
            .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
            .hmac_hash(hashes.SHA256())
            .build(password)
        )
    return pkcs12.serialize_key_and_certificates(
        b"client", key, certificates[0], certificates[1:], encryption
    )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_the_counts_of_a_real_file_are_found(identity):
    # The MAC's count (2,048 here) and one per encrypted part (two: the
    # certificates and the key).
    assert pkcs12_work.total_iterations(_pkcs12(identity, rounds=3000)) == 2048 + 6000


@pytest.mark.parametrize("rounds", [None, 2048, 600_000])
def test_files_exported_with_usual_settings_open(identity, rounds):
    found, problems = identity_from_pkcs12(_b64(_pkcs12(identity, rounds=rounds)), "pw")
    assert problems == []
    assert found is not None and found.subject


def test_a_file_asking_for_too_much_work_is_refused_before_it_is_opened(identity):
    # Five million rounds for each of its two encrypted parts: opening it
    # takes seconds of a worker's CPU; refused at once, saying what to do.
    raw = _pkcs12(identity, rounds=5_000_000)
    started = time.monotonic()
    found, problems = identity_from_pkcs12(_b64(raw), "pw")
    took = time.monotonic() - started
    assert found is None
    assert problems == [
        (
            "pkcs12",
            "The file asks for more than 2,000,000 key-derivation iterations in "
            "all; export it again with your tool's default settings.",
        )
    ]
    assert took < 0.5, took


def _tlv(tag: int, content: bytes) -> bytes:
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    size = (length.bit_length() + 7) // 8
    return bytes([tag, 0x80 | size]) + length.to_bytes(size, "big") + content


def _params(salt: bytes, count: int) -> bytes:
    """A SEQUENCE { salt OCTET STRING, count INTEGER }: every count's shape."""
    integer = count.to_bytes((count.bit_length() + 8) // 8, "big")
    return _tlv(0x30, _tlv(0x04, salt) + _tlv(0x02, integer))


def test_counts_behind_indefinite_lengths_are_found():
    # BER as some exporters write it: lengths 0x80, closed by 00 00.
    inner = b"\x30\x80" + _params(b"salt", 3_000_000) + b"\x00\x00"
    assert pkcs12_work.total_iterations(b"\x30\x80" + inner + b"\x00\x00") == 3_000_000


def test_counts_inside_encoded_octet_strings_are_found():
    # A ContentInfo's data is an OCTET STRING holding more structure.
    wrapped = _tlv(0x04, _tlv(0x30, _params(b"salt", 1_500_000)))
    outer = _tlv(0x30, _params(b"mac-salt", 2048) + _tlv(0xA0, wrapped))
    assert pkcs12_work.total_iterations(outer) == 1_500_000 + 2048


def test_an_integer_after_anything_but_a_salt_is_not_a_count():
    # A certificate's serial number follows a [0] version, never a salt.
    certificate = _tlv(0x30, _tlv(0xA0, _tlv(0x02, b"\x02")) + _tlv(0x02, b"\x7f" * 19))
    assert pkcs12_work.total_iterations(certificate) == 0


@pytest.mark.parametrize(
    "data",
    [
        b"\x30\x05\x02\x01",  # cut short
        b"\x30\x80\x02\x01\x01",  # indefinite, never closed
        b"\x04\x80\x00\x00",  # indefinite on a primitive
        b"\x30\x00trailing",
        b"\x30\x80" * 40 + b"\x00\x00" * 40,  # nested past MAX_DEPTH
        b"\x30\x84\xff\xff\xff\xff",  # a length past the data
    ],
)
def test_what_is_not_ber_is_unreadable(data):
    with pytest.raises(pkcs12_work.Unreadable):
        pkcs12_work.total_iterations(data)


def test_an_unreadable_upload_is_refused_with_a_plain_message():
    found, problems = identity_from_pkcs12(_b64(b"\x30\x80\x02\x01\x01"), "pw")
    assert found is None
    assert problems == [
        ("pkcs12", "Could not read the file: it is not a PKCS#12 file.")
    ]


def test_a_salt_that_begins_like_structure_is_plain_bytes():
    # Random salts sometimes parse as a TLV whose inside does not (here a
    # SEQUENCE holding an INTEGER cut short): 1 file in a few hundred was
    # refused as unreadable before this was read as plain bytes.
    looks_like_structure = b"\x30\x03\x02\x05\x00"
    assert pkcs12_work.total_iterations(_params(looks_like_structure, 2048)) == 2048


def test_structure_too_deep_inside_an_octet_string_is_refused_not_skipped():
    # Else a file could hide its counts where the walk gives up.
    deep = b"\x30\x80" * 30 + _params(b"salt", 9_000_000) + b"\x00\x00" * 30
    with pytest.raises(pkcs12_work.TooComplex):
        pkcs12_work.total_iterations(_tlv(0x30, _tlv(0x04, deep)))
