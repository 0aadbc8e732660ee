"""NATS for the JetStream sender's tests: requests to send through KindSender,
the shared server on 127.0.0.1:4222 (no auth) as a consumer sees it, a
nats-server of a test's own (users, a denied subject, TLS), and a loopback
server that greets as NATS does and then never acknowledges."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import nats
import trustme
from nats.js.api import StreamConfig

from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.outgoing import signed_request
from tests.support.jobs import a_job

SHARED_PORT = 4222
SECRET = "whsec_c2VjcmV0"  # a_job()'s signing secret
NATS_SERVER = "/usr/sbin/nats-server"
READY_SECONDS = 10


class NoHttp:
    """HTTP is not under test here: a broker request must never reach it."""

    async def send(self, request):
        raise AssertionError(f"an http send of {request.url}")

    async def close(self) -> None:
        pass


def a_request(port: int, subject: str, *, host: str = "127.0.0.1", **changes):
    """a_job()'s request, signed now, to the subject on 127.0.0.1:port;
    tls=True makes it a tls:// URL, event_id a different event."""
    job = a_job(
        **{k: changes.pop(k) for k in ("event_id", "delivery_id") if k in changes}
    )
    request = signed_request(job, timestamp=int(time.time()))
    scheme = "tls" if changes.pop("tls", False) else "nats"
    changes = {"broker_hosts": ("127.0.0.1",), **changes}
    return dataclasses.replace(
        request,
        url=f"{scheme}://{host}:{port}",
        kind="nats",
        target={"subject": subject},
        **changes,
    )


def send(*requests, timeout: float = 3.0, between=None, **options):
    """The results of sending the requests in turn on one KindSender;
    between(i) runs after the i-th (from 0)."""

    async def go():
        sender = KindSender(
            http=NoHttp(), timeout=timeout, allow_private=False, **options
        )
        results = []
        try:
            for i, request in enumerate(requests):
                results.append(await sender.send(request))
                if between:
                    between(i)
        finally:
            await sender.close()
        return results

    return asyncio.run(go())


def jetstream(port: int, action, **connect):
    """action(js) on a connection of the test's own, as a consumer's."""

    async def go():
        client = await nats.connect(f"nats://127.0.0.1:{port}", **connect)
        try:
            return await action(client.jetstream())
        finally:
            await client.close()

    return asyncio.run(go())


def stream_on(port: int, connect: dict | None = None, **config) -> tuple[str, str]:
    """(name, prefix): a new stream taking the subjects prefix.>, both unique
    to the call; the caller deletes it."""
    name = f"RELAY_TEST_{uuid.uuid4().hex}"
    prefix = f"relay-test.{uuid.uuid4().hex}"
    subjects = [f"{prefix}.>"]
    jetstream(
        port,
        lambda js: js.add_stream(StreamConfig(name=name, subjects=subjects, **config)),
        **(connect or {}),
    )
    return name, prefix


def fetch_all(stream: str, subject: str, port: int = SHARED_PORT, **connect):
    """Every message the stream holds on subject, pulled as a consumer would."""

    async def pull(js):
        subscription = await js.pull_subscribe(subject, stream=stream)
        held = (await js.stream_info(stream)).state.messages
        return await subscription.fetch(held, timeout=2) if held else []

    return jetstream(port, pull, **connect)


def open_connections(port: int) -> int:
    """This process's established TCP connections to port (IPv4)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed while listed
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == port and fields[3] == "01" and fields[9] in inodes:
            count += 1  # 01: ESTABLISHED
    return count


# Users (one may not publish under relay-denied.), JetStream, and with tls a
# certificate naming "localhost" only. Port -1: the server picks a free one.
CONFIG = """
listen: "127.0.0.1:-1"
jetstream {{ store_dir: "{store}" }}
authorization {{ users = [
  {{ user: relay, password: "{password}" }}
  {{ user: limited, password: "{password}",
     permissions: {{ publish: {{ deny: ["relay-denied.>"] }} }} }}
] }}
{tls}
"""


class NatsServer:
    """A nats-server process of the test's own; stop() ends it."""

    def __init__(self, directory: Path, *, tls: bool = False) -> None:
        self.password = f"pw-{uuid.uuid4().hex}"
        self.authority = trustme.CA()
        tls_block = ""
        if tls:
            cert, key = directory / "cert.pem", directory / "key.pem"
            issued = self.authority.issue_cert("localhost")
            issued.cert_chain_pems[0].write_to_path(cert)
            issued.private_key_pem.write_to_path(key)
            tls_block = f'tls {{ cert_file: "{cert}", key_file: "{key}" }}'
        conf = directory / "nats.conf"
        conf.write_text(
            CONFIG.format(store=directory / "js", password=self.password, tls=tls_block)
        )
        self.process = subprocess.Popen(
            [NATS_SERVER, "-c", str(conf)], stderr=subprocess.PIPE, text=True
        )
        self.port = self._ready_port()

    def _ready_port(self) -> int:
        found: dict[str, int] = {}
        ready = threading.Event()

        def read():  # it logs the port it took, then "Server is ready"
            for line in self.process.stderr:
                if port := re.search(r"client connections on 127\.0\.0\.1:(\d+)", line):
                    found["port"] = int(port[1])
                if "Server is ready" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(READY_SECONDS):
            self.stop()
            raise RuntimeError("nats-server did not start")
        return found["port"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


class GreetingServer:
    """A loopback server that greets as NATS does (offering no TLS), answers
    PING with PONG and nothing else, and keeps every byte it is sent."""

    INFO = b'INFO {"server_id":"x","headers":true,"auth_required":true}\r\n'

    def __init__(self) -> None:
        self.received = bytearray()
        self.published = threading.Event()  # a PUB (or HPUB) has arrived
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            connection, _ = self._listener.accept()
        except OSError:
            return  # closed before anyone came
        with connection:
            connection.sendall(self.INFO)
            try:
                while data := connection.recv(65536):
                    self.received.extend(data)
                    if b"PUB " in self.received:
                        self.published.set()
                    if b"PING" in data:
                        connection.sendall(b"PONG\r\n")
            except OSError:
                pass

    def __enter__(self) -> GreetingServer:
        return self

    def __exit__(self, *exc) -> None:
        self._listener.close()
        self._thread.join(timeout=5)
