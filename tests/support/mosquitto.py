"""MQTT brokers of a test's own on loopback (issue 41): a real mosquitto on
a free port with the settings a test needs, and a scripted server that says
one thing to each CONNECT; and how to look at what a client did with them."""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import subprocess
import threading
from pathlib import Path

MOSQUITTO = "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = "/usr/bin/mosquitto_passwd"
WAIT_SECONDS = 5  # the most a helper waits for a broker or a client


def connections_to(port: int) -> int:
    """This process's established TCP connections to 127.0.0.1:port."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone
            ours.add(os.readlink(f"/proc/self/fd/{fd}"))
    remote = f"0100007F:{port:04X}"
    return sum(
        1
        for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]
        if (fields := line.split())[2] == remote
        and fields[3] == "01"  # ESTABLISHED
        and f"socket:[{fields[9]}]" in ours
    )


class Mosquitto:
    """A mosquitto of our own on a free loopback port, for one module."""

    def __init__(self, folder: Path, settings: str) -> None:
        with socket.create_server(("127.0.0.1", 0)) as probe:
            self.port = probe.getsockname()[1]
        config = folder / "mosquitto.conf"
        config.write_text(
            f"listener {self.port} 127.0.0.1\n"
            # Run as root, mosquitto would become user `mosquitto`, who cannot
            # read the test's private folder.
            f"user {getpass.getuser()}\n"
            "persistence false\nlog_dest stderr\n" + settings
        )
        self.log: list[str] = []
        self._running = threading.Event()
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(config)], stderr=subprocess.PIPE, text=True
        )
        # Read its log all along: to see it start, and so a full pipe never
        # stops the broker.
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if not self._running.wait(WAIT_SECONDS):
            self.close()
            raise AssertionError(f"mosquitto did not start: {self.log}")

    def _read_log(self) -> None:
        for line in self.process.stderr:
            self.log.append(line)
            if line.endswith(" running\n"):
                self._running.set()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(WAIT_SECONDS)  # it reads to the end of the log
        self.process.stderr.close()


def packet_types(data: bytes) -> list[int]:
    """The MQTT control packet types in a byte stream (CONNECT is 1)."""
    types, at = [], 0
    while at < len(data):
        types.append(data[at] >> 4)
        length, shift, at = 0, 0, at + 1
        while True:
            length |= (data[at] & 0x7F) << shift
            shift, at = shift + 7, at + 1
            if not data[at - 1] & 0x80:
                break
        at += length
    return types


class ScriptedBroker:
    """A loopback server that answers each connection's CONNECT with `answer`
    and then reads, and never answers, whatever else comes."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.received: list[bytearray] = []  # per connection, in order
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def __enter__(self) -> ScriptedBroker:
        return self

    def __exit__(self, *exc) -> None:
        # shutdown() wakes the accept() under way, which close() alone does not.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._accepting.join(WAIT_SECONDS)
        self._listener.close()
        for thread in self._threads:
            thread.join(WAIT_SECONDS)  # each ends when its client hangs up

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            received = bytearray()
            self.received.append(received)
            thread = threading.Thread(
                target=self._serve, args=(connection, received), daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket, received: bytearray) -> None:
        with connection:
            connection.settimeout(WAIT_SECONDS)
            with contextlib.suppress(OSError):
                received.extend(connection.recv(65536))
                connection.sendall(self.answer)
                while chunk := connection.recv(65536):
                    received.extend(chunk)
