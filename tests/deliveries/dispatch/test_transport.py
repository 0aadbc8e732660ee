"""The Sender against a real loopback server: one POST in, one SendResult out."""

from __future__ import annotations

import socket

from deliveries.dispatch.transport import OutgoingRequest, Sender
from tests.fakes import Receiver, Reply


def sender(**kw) -> Sender:
    return Sender(timeout=kw.pop("timeout", 5), body_limit=64, allow_private=True, **kw)


def post(url: str, s: Sender | None = None):
    return (s or sender()).send(
        OutgoingRequest(url=url, headers={"X-A": "1"}, body=b"{}")
    )


def test_a_redirect_is_returned_not_followed():
    with Receiver(
        lambda r: Reply(status=302, headers={"Location": "/elsewhere"})
    ) as rx:
        result = post(rx.url)
        assert result.status_code == 302
        assert [r.path for r in rx.received] == ["/hook"]


def test_a_slow_receiver_is_a_timeout():
    with Receiver(lambda r: Reply(delay=1.0)) as rx:
        result = post(rx.url, sender(timeout=0.2))
    assert (result.status_code, result.error_kind) == (None, "timeout")


def test_a_closed_port_is_a_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = post(f"http://127.0.0.1:{port}/hook")
    assert (result.status_code, result.error_kind) == (None, "connection_error")


def test_the_policy_is_checked_again_at_send_time():
    with Receiver() as rx:
        result = Sender(timeout=5, body_limit=64, allow_private=False).send(
            OutgoingRequest(url=rx.url, headers={}, body=b"{}")
        )
        assert result.error_kind == "destination_blocked"
        assert rx.received == []


def test_retry_after_and_a_truncated_body_come_back():
    with Receiver(
        lambda r: Reply(status=503, body=b"y" * 1000, headers={"Retry-After": "7"})
    ) as rx:
        result = post(rx.url)
    assert (result.status_code, result.retry_after, len(result.body_excerpt)) == (
        503,
        "7",
        64,
    )


def test_a_body_that_trickles_past_the_timeout_is_a_timeout():
    import threading
    import time

    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n")
            # One byte at a time: each recv succeeds, the whole never does.
            while not stop.wait(0.1):
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    started = time.monotonic()

    result = post(f"http://127.0.0.1:{port}/hook", sender(timeout=0.5))

    stop.set()
    listener.close()
    assert (result.status_code, result.error_kind) == (None, "timeout")
    assert "200" in result.error_message
    assert (
        time.monotonic() - started < 2.5
    )  # bounded by the attempt, not by the trickle
