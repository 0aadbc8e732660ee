"""The destination policy on the async send path: the save-time tables again.

Sends that must be refused go end to end only where the address is on this
machine (loopback, 0.0.0.0, ::), with a real server there that must see
nothing; any other non-public address is checked at the path's two gates
(check_literal, CheckedAddresses) without ever being dialled.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import threading
import time

import pytest
import trustme

from deliveries.dispatch.resolver import CheckedAddresses, check_literal
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest
from endpoints.destinations import (
    DestinationRefused,
    check_url,
    resolve_host,
    url_host_and_port,
)
from tests.endpoints.test_destinations import (
    MALFORMED,
    NON_PUBLIC,
    PUBLIC_IP,
    PUBLIC_LITERALS,
    must_not_resolve,
    resolver,
)
from tests.support.hostile import HostileReceiver


def send(url: str, **options):
    options = {"timeout": 5, "body_limit": 64, "allow_private": False, **options}

    async def go():
        sender = AsyncSender(**options)
        try:
            return await sender.send(OutgoingRequest(url=url, headers={}, body=b"{}"))
        finally:
            await sender.close()

    return asyncio.run(go())


def refused_at_a_gate(url: str) -> DestinationRefused | None:
    """What the async path's gates say about url, without connecting."""
    try:
        check_literal(url, allow_private=False)
        host, port = url_host_and_port(url)
        asyncio.run(CheckedAddresses(allow_private=False)(host, port))
    except DestinationRefused as refused:
        return refused
    return None


def on_this_machine(url: str) -> bool:
    host, port = url_host_and_port(url)
    for address in resolve_host(host, port):
        ip = ipaddress.ip_address(address.split("%")[0])
        ip = getattr(ip, "ipv4_mapped", None) or ip
        if not (ip.is_loopback or ip.is_unspecified):
            return False
    return True


LOCAL = [u for u in NON_PUBLIC if on_this_machine(u)]
ELSEWHERE = [u for u in NON_PUBLIC if not on_this_machine(u)]


@pytest.fixture(scope="module")
def listener():
    with HostileReceiver() as rx:
        yield rx


@pytest.mark.parametrize(("url", "reason"), MALFORMED)
def test_a_malformed_url_is_refused_before_resolving(url, reason):
    result = send(url, resolve=must_not_resolve)
    assert (result.status_code, result.error_kind) == (None, "destination_blocked")
    assert reason in result.error_message


@pytest.mark.parametrize("url", LOCAL)
def test_a_local_address_is_refused_and_never_reached(listener, url):
    host, _ = url_host_and_port(url)
    bracketed = f"[{host}]" if ":" in host else host
    scheme = url.split(":", 1)[0]
    here = f"{scheme}://{bracketed}:{listener.port}/ok"
    before = len(listener.received)

    result = send(here)

    assert (result.status_code, result.error_kind) == (None, "destination_blocked")
    assert "only public addresses may be called" in result.error_message
    assert len(listener.received) == before


@pytest.mark.parametrize("url", ELSEWHERE)
def test_a_private_address_elsewhere_is_refused_at_a_gate(url):
    refused = refused_at_a_gate(url)
    assert refused is not None
    assert refused.code == "destination_blocked"


def test_the_tables_cover_both_literals_and_names():
    assert {"http://localhost/", "http://127.0.0.1/", "http://[::1]/"} <= set(LOCAL)
    assert "http://169.254.169.254/latest/meta-data" in ELSEWHERE


def test_a_url_allowed_once_is_still_judged_by_the_policy_of_each_send(listener):
    # The send-time gate remembers what passed (it runs before every send):
    # a loopback URL let through while private destinations were allowed
    # must still be refused, and never reached, by a sender that forbids them.
    url = f"http://127.0.0.1:{listener.port}/ok"
    before = len(listener.received)
    assert send(url, allow_private=True).status_code == 200
    assert len(listener.received) == before + 1
    for _ in range(2):  # a refusal is not remembered as a pass either
        result = send(url)
        assert (result.status_code, result.error_kind) == (
            None,
            "destination_blocked",
        )
    assert len(listener.received) == before + 1


@pytest.mark.parametrize(("url", "address"), PUBLIC_LITERALS)
def test_a_public_ip_literal_passes_the_gates(url, address):
    check_literal(url, allow_private=False)  # no exception


def test_a_public_name_resolves_to_its_checked_addresses_only():
    resolve = resolver({"example.com": [PUBLIC_IP]})
    addresses = asyncio.run(
        CheckedAddresses(allow_private=False, resolve=resolve)("example.com", 443)
    )
    assert addresses == [PUBLIC_IP]


def test_one_private_address_among_several_refuses_the_name():
    resolve = resolver({"example.com": [PUBLIC_IP, "10.0.0.5"]})
    with pytest.raises(DestinationRefused, match="private or loopback"):
        asyncio.run(
            CheckedAddresses(allow_private=False, resolve=resolve)("example.com", 443)
        )


def test_a_name_that_does_not_resolve_is_a_dns_error():
    def fail(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    result = send("https://nowhere.invalid/hook", resolve=fail)
    assert (result.status_code, result.error_kind) == (None, "dns_error")


def test_public_at_save_time_private_at_send_time_is_refused_at_send_time(listener):
    answers = iter([[PUBLIC_IP], ["127.0.0.1"]])

    def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    url = f"http://rebind.example:{listener.port}/ok"
    before = len(listener.received)
    assert check_url(url, allow_private=False, resolve=rebinding) == [PUBLIC_IP]

    result = send(url, resolve=rebinding)

    assert (result.status_code, result.error_kind) == (None, "destination_blocked")
    assert "private or loopback" in result.error_message
    assert len(listener.received) == before


def test_the_send_connects_to_the_checked_address_with_the_url_host(listener):
    # No DNS knows this name: the only way to the server is the checked address.
    resolve = resolver({"relay-test.example": ["127.0.0.1"]})
    url = f"http://relay-test.example:{listener.port}/ok"

    result = send(url, resolve=resolve, allow_private=True)

    assert result.status_code == 200
    assert listener.headers[-1]["Host"] == f"relay-test.example:{listener.port}"
    assert resolve.calls == [("relay-test.example", listener.port)]


def test_proxies_and_netrc_from_the_environment_are_ignored(
    listener, monkeypatch, tmp_path
):
    # A proxy would resolve the host itself, after the check; port 9 is discard.
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login user password secret\n")
    monkeypatch.setenv("NETRC", str(netrc))

    result = send(listener.url("ok"), allow_private=True)

    assert result.status_code == 200
    assert "Authorization" not in listener.headers[-1]


# --- TLS: verified against the URL's host name, which SNI carries ----------------


@pytest.fixture(scope="module")
def tls_server():
    """An HTTPS server on 127.0.0.1 whose certificate names relay-test.example."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("relay-test.example").configure_cert(server_ctx)
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

    threading.Thread(target=loop.run_forever, daemon=True).start()
    server = asyncio.run_coroutine_threadsafe(
        asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx), loop
    ).result()
    port = server.sockets[0].getsockname()[1]
    yield port, client_ctx, names
    loop.call_soon_threadsafe(server.close)
    loop.call_soon_threadsafe(loop.stop)


def send_tls(name: str, port: int, client_ctx: ssl.SSLContext | None):
    """https://name:port/ with name pinned to 127.0.0.1, trusting client_ctx's CAs."""
    return send(
        f"https://{name}:{port}/hook",
        resolve=resolver({name: ["127.0.0.1"]}),
        allow_private=True,
        ssl_context=client_ctx,
    )


def test_tls_is_verified_against_the_url_host_sent_as_sni(tls_server):
    port, client_ctx, names = tls_server
    result = send_tls("relay-test.example", port, client_ctx)
    assert result.status_code == 200
    assert names[-1] == "relay-test.example"


def test_a_certificate_for_another_name_is_a_tls_error(tls_server):
    port, client_ctx, _ = tls_server
    result = send_tls("other.example", port, client_ctx)
    assert (result.status_code, result.error_kind) == (None, "tls_error")


def test_an_untrusted_certificate_is_a_tls_error(tls_server):
    port, _, _ = tls_server
    result = send_tls("relay-test.example", port, None)  # the system's CAs only
    assert (result.status_code, result.error_kind) == (None, "tls_error")


def test_a_fully_qualified_name_is_verified_and_sent_as_sni_without_its_dot(
    tls_server,
):
    port, client_ctx, names = tls_server
    result = send_tls("relay-test.example.", port, client_ctx)
    assert (result.status_code, result.error_kind) == (200, "")
    assert names[-1] == "relay-test.example"


def test_sends_that_ask_for_one_name_at_once_share_one_lookup():
    calls: list[str] = []

    def slow(host: str, port: int) -> list[str]:
        calls.append(host)
        time.sleep(0.3)  # a merchant's slow DNS server, not a test waiting
        return [PUBLIC_IP]

    async def go():
        addresses = CheckedAddresses(allow_private=False, resolve=slow)
        try:
            return await asyncio.gather(
                *(addresses("slow.example", 443) for _ in range(20))
            )
        finally:
            addresses.close()

    assert asyncio.run(go()) == [[PUBLIC_IP]] * 20
    assert calls == ["slow.example"]


def test_a_happy_eyeballs_fallback_when_the_first_address_drops_packets():
    # The name's first address is a listener whose backlog is full (the kernel
    # drops the SYNs); its second is a real receiver on the same port.
    with HostileReceiver() as rx:
        silent = socket.socket()
        silent.bind(("127.0.0.2", rx.port))
        silent.listen(0)
        fillers = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.2", rx.port))
                fillers.append(filler)
            time.sleep(0.05)  # let the kernel complete the fillers' handshakes
            result = send(
                f"http://relay-test.example:{rx.port}/ok",
                resolve=resolver({"relay-test.example": ["127.0.0.2", "127.0.0.1"]}),
                allow_private=True,
                timeout=3,
            )
        finally:
            for s in [*fillers, silent]:
                s.close()
    assert (result.status_code, result.error_kind) == (200, "")
    assert result.duration_ms < 2000
