"""Client certificates (mTLS) and per-endpoint CA bundles through
AsyncSender.send, against a real HTTPS receiver on 127.0.0.1 that asks for
a client certificate (tests/support/mtls_receiver.py): the right one is
answered, a refusal names its cause, identities never share a connection."""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime, timedelta

import pytest
import trustme

from deliveries.dispatch.credentials import ClientTls
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest, SendResult
from tests.endpoints.test_destinations import resolver
from tests.support.connect_proxy import ConnectProxy
from tests.support.mtls_receiver import MtlsReceiver

TLS_VERSIONS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


def pem(blob) -> str:
    return blob.bytes().decode()


def identity(leaf: trustme.LeafCert, ca_bundle: str = "") -> ClientTls:
    chain = "".join(pem(b) for b in leaf.cert_chain_pems)
    return ClientTls(
        cert_chain=chain, key=pem(leaf.private_key_pem), ca_bundle=ca_bundle
    )


@pytest.fixture(scope="module")
def server_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def client_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def client_a(client_ca) -> trustme.LeafCert:
    return client_ca.issue_cert("a.clients.example", common_name="client-a")


@pytest.fixture(scope="module")
def client_b(client_ca) -> trustme.LeafCert:
    return client_ca.issue_cert("b.clients.example", common_name="client-b")


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def send_all(
    url: str, identities: list[ClientTls | None], **options
) -> list[SendResult]:
    """One send per identity, in turn, on one AsyncSender closed at the end."""
    options = {"timeout": 5, "body_limit": 64, "allow_private": True, **options}

    async def go():
        sender = AsyncSender(**options)
        try:
            return [
                await sender.send(
                    OutgoingRequest(url=url, headers={}, body=b"{}", client_tls=tls)
                )
                for tls in identities
            ]
        finally:
            await sender.close()

    return asyncio.run(go())


def receiving(server_ca, client_ca, name: str = "127.0.0.1", **options) -> MtlsReceiver:
    return MtlsReceiver(
        server_cert=server_ca.issue_cert(name), client_ca=client_ca, **options
    )


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda v: v.name)
def test_the_right_client_certificate_is_answered(
    server_ca, client_ca, client_a, version
):
    with receiving(server_ca, client_ca, maximum_version=version) as rx:
        [result] = send_all(
            rx.url(), [identity(client_a)], ssl_context=trusting(server_ca)
        )

    assert (result.status_code, result.error_kind) == (200, "")
    assert [seen.client for seen in rx.seen] == ["client-a"]


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda v: v.name)
def test_no_client_certificate_is_a_refused_handshake(server_ca, client_ca, version):
    # The default path: no identity of the endpoint's own. Under TLS 1.3 the
    # alert is read only after the request was written.
    with receiving(server_ca, client_ca, maximum_version=version, graceful=True) as rx:
        [result] = send_all(rx.url(), [None], ssl_context=trusting(server_ca))

    assert result.error_kind == "tls_error"
    assert result.error_message.startswith(
        "the TLS handshake failed (handshake refused): "
        "the receiver sent the alert certificate_required"
        if version == ssl.TLSVersion.TLSv1_3
        else "the TLS handshake failed (handshake refused): "
        "the receiver sent the alert handshake_failure"
    )


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda v: v.name)
def test_a_refusal_whose_alert_is_lost_is_still_a_refused_handshake(
    server_ca, client_ca, version
):
    # The receiver's private CA trusted, no certificate of the endpoint's own.
    bundle_only = ClientTls(ca_bundle=pem(server_ca.cert_pem))
    with receiving(server_ca, client_ca, maximum_version=version) as rx:
        # Several new connections: under TLS 1.3 the receiver's alert is
        # read on some, lost to its reset on others; both are refusals.
        results = send_all(rx.url(), [bundle_only] * 8)

    for result in results:
        assert result.error_kind == "tls_error"
        assert result.error_message.startswith(
            "the TLS handshake failed (handshake refused): the receiver "
        )


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda v: v.name)
def test_an_expired_client_certificate_is_named_expired(server_ca, client_ca, version):
    now = datetime.now(UTC)
    expired = client_ca.issue_cert(
        "old.clients.example",
        not_before=now - timedelta(days=30),
        not_after=now - timedelta(days=1),
    )
    with receiving(server_ca, client_ca, maximum_version=version, graceful=True) as rx:
        [result] = send_all(
            rx.url(), [identity(expired)], ssl_context=trusting(server_ca)
        )

    assert result.error_kind == "tls_error"
    assert result.error_message.startswith(
        "the TLS handshake failed (expired): "
        "the receiver sent the alert certificate_expired"
    )
    assert rx.seen == []
    key = identity(expired).key.splitlines()[1:-1]
    assert not any(line in repr(result) for line in key)


def test_a_receiver_certificate_from_a_ca_outside_the_bundle_is_an_unknown_ca(
    server_ca, client_ca, client_a
):
    other_ca = trustme.CA()
    with receiving(server_ca, client_ca) as rx:
        # The sender's own trust includes the receiver's CA: the bundle
        # replaces it, it does not add to it.
        [result] = send_all(
            rx.url(),
            [identity(client_a, ca_bundle=pem(other_ca.cert_pem))],
            ssl_context=trusting(server_ca),
        )

    assert result.error_kind == "tls_error"
    assert result.error_message == (
        "the TLS handshake failed (unknown CA): unable to get local issuer certificate"
    )


def test_a_receiver_certificate_for_another_name_is_a_name_mismatch(
    server_ca, client_ca, client_a
):
    with receiving(server_ca, client_ca) as rx:
        [result] = send_all(
            rx.url("hooks.example"),
            [identity(client_a, ca_bundle=pem(server_ca.cert_pem))],
            resolve=resolver({"hooks.example": ["127.0.0.1"]}),
        )

    assert result.error_kind == "tls_error"
    assert result.error_message.startswith(
        "the TLS handshake failed (name mismatch): Hostname mismatch"
    )
    assert "hooks.example" in result.error_message


def test_a_ca_bundle_alone_trusts_a_private_ca(server_ca, client_ca):
    bundle_only = ClientTls(ca_bundle=pem(server_ca.cert_pem))
    with receiving(server_ca, client_ca, require=False) as rx:
        # No ssl_context: the sender's default trust is the system's, which
        # knows nothing of the private CA.
        trusted, untrusted = send_all(rx.url(), [bundle_only, None])

    assert (trusted.status_code, trusted.error_kind) == (200, "")
    assert untrusted.error_kind == "tls_error"
    assert "(unknown CA)" in untrusted.error_message


def test_two_identities_to_one_host_never_share_a_connection(
    server_ca, client_ca, client_a, client_b
):
    a, b = identity(client_a), identity(client_b)
    with receiving(server_ca, client_ca) as rx:
        results = send_all(
            rx.url(), [a, b, a, b, None], ssl_context=trusting(server_ca)
        )

    assert [r.status_code for r in results[:4]] == [200, 200, 200, 200]
    # Each request arrived on a connection that presented its own sender's
    # certificate; each identity kept its one connection alive between sends.
    assert [seen.client for seen in rx.seen] == ["client-a", "client-b"] * 2
    by_client = {seen.client: set() for seen in rx.seen}
    for seen in rx.seen:
        by_client[seen.client].add(seen.connection)
    assert [len(c) for c in by_client.values()] == [1, 1]
    assert by_client["client-a"] != by_client["client-b"]
    # The default identity (none) does not take either one's connection.
    assert results[4].status_code is None


def test_a_close_after_a_tls13_handshake_that_sent_a_certificate_is_refused(
    server_ca, client_ca, client_a
):
    with receiving(server_ca, client_ca, close_for=frozenset({"client-a"})) as rx:
        [result] = send_all(
            rx.url(), [identity(client_a)], ssl_context=trusting(server_ca)
        )

    assert result.error_kind == "tls_error"
    assert result.error_message.startswith(
        "the TLS handshake failed (handshake refused): the receiver closed"
    )


def test_a_close_before_answering_without_a_client_certificate_stays_a_close(
    server_ca, client_ca
):
    # The same close, with no certificate sent: nothing was refused.
    with receiving(
        server_ca, client_ca, require=False, close_for=frozenset({""})
    ) as rx:
        [result] = send_all(rx.url(), [None], ssl_context=trusting(server_ca))

    assert result.error_kind == "connection_error"


def test_mtls_works_inside_the_egress_proxys_tunnel(server_ca, client_ca, client_a):
    with (
        ConnectProxy() as proxy,
        receiving(server_ca, client_ca, name="hooks.example") as rx,
    ):
        ok, refused = send_all(
            rx.url("hooks.example"),
            [identity(client_a), None],
            ssl_context=trusting(server_ca),
            proxy=proxy.url,
            resolve=resolver({"hooks.example": ["127.0.0.1"]}),
        )

    assert (ok.status_code, ok.error_kind) == (200, "")
    assert [seen.client for seen in rx.seen] == ["client-a"]
    assert proxy.tunnels == 2  # the certificate-less send took no tunnel of a's
    assert refused.status_code is None
