"""Sends through a real CONNECT proxy on loopback (tests/support/connect_proxy.py):
the address the policy checked is the one tunnelled to, TLS inside the tunnel
checks the URL's host, and a proxy that gives no tunnel is a proxy_error."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import threading

import pytest
import trustme

from deliveries.dispatch.transport import AsyncSender, OutgoingRequest
from deliveries.dispatch.tunnel import proxy_from_url
from tests.endpoints.test_destinations import resolver
from tests.support.connect_proxy import ConnectProxy
from tests.support.fakes import Receiver

TIMEOUT = 5.0


def send_all(urls: list[str], **options):
    """Each url in turn on one AsyncSender (closed at the end); the results."""
    options = {"timeout": TIMEOUT, "body_limit": 64, "allow_private": True, **options}

    async def go():
        sender = AsyncSender(**options)
        try:
            return [
                await sender.send(OutgoingRequest(url=u, headers={}, body=b"{}"))
                for u in urls
            ]
        finally:
            await sender.close()

    return asyncio.run(go())


def send(url: str, **options):
    return send_all([url], **options)[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def proxy():
    with ConnectProxy() as running:
        yield running


@pytest.fixture
def receiver():
    with Receiver() as running:
        yield running


def test_a_send_tunnels_to_the_checked_address_of_the_urls_host(proxy, receiver):
    port = receiver.server.server_port
    url = f"http://hooks.example:{port}/hook"

    first, second = send_all(
        [url, url],
        proxy=proxy.url,
        resolve=resolver({"hooks.example": ["127.0.0.1"]}),
    )

    assert (first.status_code, second.status_code) == (200, 200)
    # The proxy is asked for the address the relay resolved and checked, not
    # the name: it cannot resolve the name to somewhere else.
    assert proxy.connects == [f"127.0.0.1:{port}"]
    assert proxy.tunnels == 1  # the second send reused the tunnel (keep-alive)
    assert [r.headers["Host"] for r in receiver.received] == [
        f"hooks.example:{port}"
    ] * 2


def test_the_proxys_credentials_go_to_the_proxy_only(proxy, receiver):
    proxy_url = proxy.url.replace("http://", "http://relay:s%40cret@")

    result = send(receiver.url, proxy=proxy_url)

    assert result.status_code == 200
    expected = "Basic " + base64.b64encode(b"relay:s@cret").decode()
    assert proxy.headers[0]["Proxy-Authorization"] == expected
    assert "Proxy-Authorization" not in receiver.received[0].headers


@pytest.mark.parametrize("status", [403, 407, 502])
def test_a_proxy_refusing_connect_is_a_proxy_error(proxy, receiver, status):
    proxy.refuse = status

    result = send(receiver.url, proxy=proxy.url)

    assert (result.status_code, result.error_kind) == (None, "proxy_error")
    port = receiver.server.server_port
    assert result.error_message == (
        f"the egress proxy answered {status} Refused by the test proxy "
        f"to CONNECT 127.0.0.1:{port}"
    )
    assert receiver.received == []


def test_a_proxy_that_is_down_is_a_proxy_error_not_the_receivers(receiver):
    port = closed_port()

    result = send(receiver.url, proxy=f"http://127.0.0.1:{port}")

    assert result.error_kind == "proxy_error"
    assert result.error_message.startswith(
        f"could not connect to the egress proxy 127.0.0.1:{port}:"
    )


def test_a_proxy_that_never_answers_connect_is_a_proxy_error(proxy, receiver):
    proxy.stall = True

    result = send(receiver.url, proxy=proxy.url, timeout=0.5)

    assert result.error_kind == "proxy_error"
    assert result.error_message == "the egress proxy gave no tunnel within 0.5 s"


def test_once_the_tunnel_is_up_a_slow_receiver_is_its_own_timeout(proxy):
    with socket.socket() as silent:  # accepts (its backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        result = send(f"http://127.0.0.1:{port}/", proxy=proxy.url, timeout=0.5)

    assert result.error_kind == "timeout"
    assert proxy.tunnels == 1


@pytest.mark.parametrize(
    ("url", "resolved"),
    [
        ("http://internal.example:{port}/hook", ["10.1.2.3"]),
        ("http://loopback.example:{port}/hook", ["127.0.0.1"]),
        ("http://127.0.0.1:{port}/hook", []),
    ],
)
def test_the_policy_still_refuses_a_private_target_through_the_proxy(
    proxy, receiver, url, resolved
):
    # The proxy itself is on loopback, which the policy would refuse: its
    # address is trusted because the operator configured it.
    result = send(
        url.format(port=receiver.server.server_port),
        proxy=proxy.url,
        allow_private=False,
        resolve=resolver({"internal.example": resolved, "loopback.example": resolved}),
    )

    assert result.error_kind == "destination_blocked"
    assert proxy.connects == []


@pytest.fixture(scope="module")
def tls_receiver():
    """An HTTPS receiver on 127.0.0.1 whose certificate names hooks.example;
    the SNI names it was sent, and a client context trusting its CA."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.example").configure_cert(server_ctx)
    names: list[str | None] = []
    server_ctx.sni_callback = lambda _sock, name, _ctx: names.append(name)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    loop = asyncio.new_event_loop()

    async def answer(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx), loop
    ).result()
    yield server.sockets[0].getsockname()[1], client_ctx, names
    loop.call_soon_threadsafe(server.close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)


def test_https_through_the_proxy_verifies_the_urls_host(proxy, tls_receiver):
    port, client_ctx, names = tls_receiver

    result = send(
        f"https://hooks.example:{port}/hook",
        proxy=proxy.url,
        ssl_context=client_ctx,
        resolve=resolver({"hooks.example": ["127.0.0.1"]}),
    )

    assert (result.status_code, result.body_excerpt) == (200, "ok")
    assert proxy.connects == [f"127.0.0.1:{port}"]
    assert names[-1] == "hooks.example"


def test_a_certificate_for_another_name_is_the_receivers_tls_error(proxy, tls_receiver):
    port, client_ctx, _ = tls_receiver

    result = send(
        f"https://other.example:{port}/hook",
        proxy=proxy.url,
        ssl_context=client_ctx,
        resolve=resolver({"other.example": ["127.0.0.1"]}),
    )

    assert result.error_kind == "tls_error"
    assert "other.example" in result.error_message
    assert proxy.tunnels == 1  # the tunnel was up: the failure is the receiver's


@pytest.mark.parametrize(
    "url",
    [
        "https://proxy.example:3128",
        "socks5://proxy.example:1080",
        "http://proxy.example:3128/path",
        "http://proxy.example:3128/?a=1",
        "http://:3128",
    ],
)
def test_a_proxy_url_other_than_http_host_port_is_refused_at_start(url):
    with pytest.raises(ValueError, match="RELAY_EGRESS_PROXY"):
        proxy_from_url(url)


def test_no_proxy_url_sends_directly():
    assert proxy_from_url("") is None
    assert proxy_from_url("http://[::1]:3128").where == "[::1]:3128"
