"""The Redis Streams sender over TLS: a TLS front on 127.0.0.1 for the real
Redis, with a certificate for a name, reached at its pinned address."""

from __future__ import annotations

import ssl
import uuid

import pytest
import redis
import trustme

from tests.deliveries.dispatch.brokers.test_redis_streams import (
    REDIS,
    RedisFront,
    redis_request,
    send_all,
)

TLS_HOST = "redis.relay-test.example"


@pytest.fixture
def admin():
    client = redis.Redis(*REDIS)
    yield client
    client.close()


@pytest.fixture
def stream(admin):
    key = f"relay-test-{uuid.uuid4().hex}"
    yield key
    admin.delete(key)


@pytest.fixture
def tls_redis():
    """A TLS front for the real Redis on 127.0.0.1, its certificate for
    TLS_HOST: (port, a client context trusting it, the SNI names it saw)."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(TLS_HOST).configure_cert(server_ctx)
    names: list[str | None] = []
    server_ctx.sni_callback = lambda _sock, name, _ctx: names.append(name)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)

    front = RedisFront(tls=server_ctx)
    yield front.port, client_ctx, names
    front.close()


def tls_send(port: int, stream: str, client_ctx: ssl.SSLContext, host: str):
    request = redis_request(
        port,
        stream,
        scheme="rediss",
        host=host,
        broker_hosts=(host, "127.0.0.1"),
    )
    [result] = send_all(
        [request],
        ssl_context=client_ctx,
        resolve=lambda name, _port: ["127.0.0.1"],
    )
    return result


def test_tls_checks_the_certificate_against_the_url_host(admin, stream, tls_redis):
    port, client_ctx, names = tls_redis

    result = tls_send(port, stream, client_ctx, TLS_HOST)

    assert result.acknowledged, result
    assert names == [TLS_HOST]  # SNI names the host, not the address dialled
    assert admin.xlen(stream) == 1


def test_tls_to_a_host_the_certificate_does_not_name_is_a_tls_error(
    admin, stream, tls_redis
):
    port, client_ctx, _ = tls_redis

    result = tls_send(port, stream, client_ctx, "other.relay-test.example")

    assert (result.error_kind, result.acknowledged) == ("tls_error", False)
    assert "other.relay-test.example" in result.error_message
    assert "Hostname mismatch" in result.error_message
    assert admin.exists(stream) == 0
