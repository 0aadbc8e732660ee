"""The NATS JetStream sender where the server asks for credentials, denies a
subject or speaks TLS: a nats-server of the module's own on a free loopback
port (the shared one has no auth and no TLS), stopped at the end."""

from __future__ import annotations

import ssl
import time
import uuid

import pytest

from tests.support.jetstream import (
    GreetingServer,
    NatsServer,
    a_request,
    fetch_all,
    send,
    stream_on,
)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    server = NatsServer(tmp_path_factory.mktemp("nats-auth"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    server = NatsServer(tmp_path_factory.mktemp("nats-tls"), tls=True)
    yield server
    server.stop()


def trusting(server: NatsServer) -> ssl.SSLContext:
    context = ssl.create_default_context()
    server.authority.configure_trust(context)
    return context


def only_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def test_the_right_credentials_publish(auth_server):
    connect = {"user": "relay", "password": auth_server.password}
    name, prefix = stream_on(auth_server.port, connect=connect)
    request = a_request(
        auth_server.port, f"{prefix}.a", credentials=f"relay:{auth_server.password}"
    )

    [result] = send(request)

    assert result.acknowledged, result.error_message
    [received] = fetch_all(name, f"{prefix}.a", auth_server.port, **connect)
    assert received.data == request.body


def test_wrong_credentials_are_broker_auth_and_the_password_is_never_shown(
    auth_server,
):
    password = f"wrong-{uuid.uuid4().hex}"
    request = a_request(auth_server.port, "relay.a", credentials=f"relay:{password}")

    [result] = send(request)

    assert (result.acknowledged, result.error_kind) == (False, "broker_auth")
    assert "refused the credentials (Authorization Violation)" in result.error_message
    assert password not in result.error_message + result.body_excerpt


def test_a_subject_the_user_may_not_publish_to_is_broker_auth_at_once(auth_server):
    subject = f"relay-denied.{uuid.uuid4().hex}"
    request = a_request(
        auth_server.port, subject, credentials=f"limited:{auth_server.password}"
    )

    started = time.monotonic()
    [result] = send(request, timeout=3.0)

    assert (result.acknowledged, result.error_kind) == (False, "broker_auth")
    assert f'permissions violation for publish to "{subject}"' in result.error_message
    assert time.monotonic() - started < 3.0  # told, not timed out


def test_tls_checks_the_certificate_against_the_url_host(tls_server):
    request = a_request(
        tls_server.port,
        "relay.a",
        host="localhost",
        tls=True,
        credentials=f"relay:{tls_server.password}",
        broker_hosts=("localhost", "127.0.0.1"),
    )

    [result] = send(request, ssl_context=trusting(tls_server), resolve=only_loopback)

    # The certificate names localhost only, not 127.0.0.1: the server took
    # the TLS connection and the credentials, and JetStream answered that no
    # stream takes the subject.
    assert result.error_message == "no JetStream stream takes subject 'relay.a'"


def test_tls_to_a_host_the_certificate_does_not_name_is_a_tls_error(tls_server):
    request = a_request(
        tls_server.port,
        "relay.a",
        host="broker.test",
        tls=True,
        broker_hosts=("broker.test", "127.0.0.1"),
    )

    [result] = send(request, ssl_context=trusting(tls_server), resolve=only_loopback)

    assert (result.acknowledged, result.error_kind) == (False, "tls_error")
    assert "broker.test" in result.error_message


@pytest.mark.parametrize("credentials", ["relay:{password}", ""])
def test_a_tls_url_sends_nothing_to_a_server_that_does_not_start_tls(credentials):
    password = f"pw-{uuid.uuid4().hex}"
    with GreetingServer() as server:
        request = a_request(
            server.port,
            "relay.a",
            tls=True,
            credentials=credentials.format(password=password),
        )
        [result] = send(request, timeout=1.0)

    assert (result.acknowledged, result.error_kind) == (False, "tls_error")
    assert "did not start TLS" in result.error_message
    assert password.encode() not in server.received
    assert not server.published.is_set()
