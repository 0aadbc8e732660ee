"""A real DNS server on a loopback address of its own, for a child process
whose /etc/resolv.conf names it (`resolv_wrapper`).

It answers the names it is given with A records at once, never answers names
under `silent` (a merchant's DNS that has stalled) and says NXDOMAIN to the
rest. It listens on UDP port 53 of an address in 127.0.0.0/8 picked at random,
so two test runs on one machine never share a server.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import struct
import threading
from pathlib import Path

A, AAAA, IN = 1, 28, 1
NXDOMAIN = 3


def _question(packet: bytes) -> tuple[str, int, int]:
    """The query's name (lower case, no trailing dot), type and question's end."""
    labels, at = [], 12
    while packet[at]:
        length = packet[at]
        labels.append(packet[at + 1 : at + 1 + length].decode("ascii").lower())
        at += 1 + length
    qtype = struct.unpack("!H", packet[at + 1 : at + 3])[0]
    return ".".join(labels), qtype, at + 5


class DnsServer:
    """answers: name -> IPv4 address; names ending in `silent` get no answer."""

    def __init__(self, answers: dict[str, str], *, silent: str) -> None:
        self.answers = {name.lower(): address for name, address in answers.items()}
        self.silent = silent.lower()
        self.asked: list[str] = []  # every name asked, in order
        self._lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(20):
            self.address = str(
                ipaddress.IPv4Address("127.0.0.0") + random.randrange(2**16, 2**24 - 1)
            )
            try:
                self.sock.bind((self.address, 53))
                break
            except OSError:
                continue
        else:
            raise RuntimeError("no free loopback address for the DNS server")
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> DnsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def asked_under(self, suffix: str) -> set[str]:
        with self._lock:
            return {name for name in self.asked if name.endswith(suffix)}

    def _serve(self) -> None:
        while True:
            try:
                packet, peer = self.sock.recvfrom(512)
            except OSError:
                return  # closed
            try:
                name, qtype, end = _question(packet)
            except (IndexError, UnicodeDecodeError, struct.error):
                continue
            with self._lock:
                self.asked.append(name)
            if name.endswith(self.silent):
                continue
            self.sock.sendto(self._answer(packet, name, qtype, end), peer)

    def _answer(self, packet: bytes, name: str, qtype: int, end: int) -> bytes:
        address = self.answers.get(name)
        records = b""
        if address is not None and qtype == A:
            # A pointer to the question's name, type A, class IN, TTL 0.
            records = struct.pack("!HHHIH", 0xC00C, A, IN, 0, 4) + socket.inet_aton(
                address
            )
        rcode = NXDOMAIN if address is None else 0
        flags = 0x8180 | rcode  # a response, recursion desired and available
        header = packet[:2] + struct.pack("!HHHHH", flags, 1, 1 if records else 0, 0, 0)
        return header + packet[12:end] + records

    def resolv_wrapper(self, folder: Path, *, timeout: int = 30) -> list[str]:
        """A command prefix that runs the rest with /etc/resolv.conf naming this
        server alone (a mount namespace of the child's own; nothing else sees
        it). glibc waits `timeout` seconds for a silent answer."""
        conf = folder / "resolv.conf"
        conf.write_text(
            f"nameserver {self.address}\noptions timeout:{timeout} attempts:1\n"
        )
        return [
            "unshare",
            "--mount",
            "sh",
            "-c",
            f'mount --bind "{conf}" /etc/resolv.conf && exec "$@"',
            "resolv",
        ]
