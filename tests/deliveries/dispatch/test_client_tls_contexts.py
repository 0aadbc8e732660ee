"""client_tls.ClientContexts: one context per identity, made once, kept
within a bound, the key never left on disk; identities that cannot be used
are tls_error attempts in plain words, never an exception or key material."""

from __future__ import annotations

import asyncio
import glob
import os
import ssl
import tempfile
from datetime import UTC, datetime

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from deliveries.dispatch import client_tls, credentials
from deliveries.dispatch.client_tls import ClientContexts, TlsFailed
from deliveries.dispatch.credentials import ClientTls
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def identity_of(leaf: trustme.LeafCert, *, key: str | None = None) -> ClientTls:
    chain = "".join(b.bytes().decode() for b in leaf.cert_chain_pems)
    return ClientTls(
        cert_chain=chain,
        key=leaf.private_key_pem.bytes().decode() if key is None else key,
    )


def key_lines(tls: ClientTls) -> list[str]:
    """The key's base64 lines: any one of them in a message is a leak."""
    return [line for line in tls.key.splitlines() if not line.startswith("-----")]


def leftovers(pattern: str = "relay-mtls-*") -> list[str]:
    return [
        path
        for where in ("/dev/shm", tempfile.gettempdir())
        for path in glob.glob(os.path.join(where, pattern))
    ]


@pytest.fixture
def contexts_made():
    """ClientContexts(...) made through it are closed after the test."""
    made: list[ClientContexts] = []

    def make(*args, **options) -> ClientContexts:
        made.append(ClientContexts(*args, **options))
        return made[-1]

    yield make
    for contexts in made:
        contexts.close()


def context_of(contexts: ClientContexts, tls: ClientTls):
    return asyncio.run(contexts.context_of(tls))


def test_an_identity_is_loaded_once_and_kept(ca, contexts_made):
    contexts = contexts_made(None)
    tls = identity_of(ca.issue_cert("a.example"))
    same_again = ClientTls(cert_chain=tls.cert_chain, key=tls.key)

    first = context_of(contexts, tls)
    second = context_of(contexts, same_again)

    assert first == second
    assert first[0] == tls.fingerprint


def test_the_kept_contexts_are_bounded_least_recently_used_first(ca, contexts_made):
    contexts = contexts_made(None, kept=2)
    a, b, c = (identity_of(ca.issue_cert(f"{n}.example")) for n in "abc")
    context_a = context_of(contexts, a)[1]
    context_of(contexts, b)
    context_of(contexts, a)  # a is used again: b is now the oldest
    context_of(contexts, c)

    assert context_of(contexts, a)[1] is context_a
    assert len(contexts._made) == 2
    assert b not in contexts._made


def test_as_many_contexts_are_kept_as_dispatchers_keep_credentials_for():
    # Fewer, and identities whose credentials are kept would be rebuilt
    # (30 ms of CPU each) on every send once there are more than it.
    assert client_tls.KEPT == credentials.KEPT
    assert ClientContexts(None).kept == credentials.KEPT


def test_the_event_loop_keeps_turning_while_a_new_identity_is_built(ca, contexts_made):
    contexts = contexts_made(None)
    tls = identity_of(ca.issue_cert("a.example"))

    async def scenario():
        turns = 0
        build = asyncio.ensure_future(contexts.context_of(tls))
        while not build.done():
            turns += 1  # the loop ran something else while it was built
            await asyncio.sleep(0)
        return turns, build.result()

    turns, (fingerprint, context) = asyncio.run(scenario())

    # Built on the loop, the build would end in the loop's next turn.
    assert turns > 2
    assert fingerprint == tls.fingerprint
    assert context.get_ca_certs()  # the system's trust, loaded from its file


def test_sends_of_one_new_identity_together_share_one_build(ca, contexts_made):
    contexts = contexts_made(None)
    tls = identity_of(ca.issue_cert("a.example"))

    async def scenario():
        return await asyncio.gather(*(contexts.context_of(tls) for _ in range(10)))

    made = asyncio.run(scenario())

    assert len({id(context) for _, context in made}) == 1


def test_a_default_trust_is_written_once_for_the_builds_and_removed_at_close(
    ca, contexts_made
):
    trust = ssl.create_default_context(cafile=None)
    trust.load_verify_locations(cadata=ca.cert_pem.bytes().decode())
    before = set(leftovers("relay-trust-*"))
    contexts = contexts_made(trust)
    first = identity_of(ca.issue_cert("a.example"))
    second = identity_of(ca.issue_cert("b.example"))

    _, context = context_of(contexts, first)
    context_of(contexts, second)
    written = set(leftovers("relay-trust-*")) - before
    contexts.close()

    assert len(written) == 1
    assert context.get_ca_certs(binary_form=True) == trust.get_ca_certs(True)
    assert set(leftovers("relay-trust-*")) == before


def test_no_chain_or_key_file_is_left_behind(ca, contexts_made):
    before = set(leftovers())
    contexts = contexts_made(None)
    context_of(contexts, identity_of(ca.issue_cert("a.example")))
    with pytest.raises(TlsFailed):
        context_of(contexts, identity_of(ca.issue_cert("b.example"), key="not a key"))

    assert set(leftovers()) == before


def test_verification_stays_on_for_every_identity(ca, contexts_made):
    contexts = contexts_made(None)
    _, context = context_of(contexts, identity_of(ca.issue_cert("a.example")))
    _, bundled = context_of(contexts, ClientTls(ca_bundle=ca.cert_pem.bytes().decode()))

    for made in (context, bundled):
        assert made.check_hostname
        assert made.verify_mode.name == "CERT_REQUIRED"


def other_key(ca: trustme.CA) -> str:
    return ca.issue_cert("other.example").private_key_pem.bytes().decode()


def encrypted_key(leaf: trustme.LeafCert) -> str:
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ).decode()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "mismatched key",
            "the client certificate could not be used: "
            "the private key does not belong to the certificate",
        ),
        (
            "garbage key",
            "the client certificate could not be used: "
            "the certificate chain or private key is not valid PEM",
        ),
        (
            "encrypted key",
            "the client certificate's private key is encrypted; "
            "it must be stored without a passphrase",
        ),
        (
            "garbage bundle",
            "the endpoint's CA bundle could not be read (PEM certificates expected)",
        ),
    ],
)
def test_an_unusable_identity_is_a_tls_error_in_plain_words(ca, case, message):
    leaf = ca.issue_cert("a.example")
    tls = {
        "mismatched key": lambda: identity_of(leaf, key=other_key(ca)),
        "garbage key": lambda: identity_of(leaf, key="-----BEGIN PRIVATE KEY-----\n"),
        "encrypted key": lambda: identity_of(leaf, key=encrypted_key(leaf)),
        "garbage bundle": lambda: ClientTls(ca_bundle="not a certificate"),
    }[case]()

    async def go():
        sender = AsyncSender(timeout=5, body_limit=64, allow_private=True)
        try:
            # Nothing listens there: the identity fails before any connection.
            request = OutgoingRequest(
                url="https://127.0.0.1:9/hook", headers={}, body=b"", client_tls=tls
            )
            return request, await sender.send(request)
        finally:
            await sender.close()

    request, result = asyncio.run(go())

    assert (result.status_code, result.error_kind) == (None, "tls_error")
    assert result.error_message == message
    for shown in (repr(result), repr(request), repr(tls)):
        assert not any(line in shown for line in key_lines(tls))


def test_a_refusal_whose_alert_was_lost_names_expiry_once_the_certificate_expired(
    ca, contexts_made
):
    not_after = datetime(2031, 5, 4, 3, 2, 1, tzinfo=UTC)
    tls = identity_of(ca.issue_cert("a.example", not_after=not_after))
    now = [not_after.timestamp() - 1]
    contexts = contexts_made(None, wall_clock=lambda: now[0])
    context_of(contexts, tls)

    before = contexts.refused_on_first_read(tls)
    now[0] = not_after.timestamp() + 1
    after = contexts.refused_on_first_read(tls)

    assert before.startswith("the TLS handshake failed (handshake refused): ")
    assert before.endswith("when it refuses the client certificate")
    assert after == (
        "the TLS handshake failed (expired): the receiver closed the new "
        "connection before answering, and the client certificate expired at "
        "2031-05-04 03:02:01 UTC"
    )
