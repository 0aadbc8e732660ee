"""The image's HEALTHCHECK: healthy when the web server's GET /healthz answers
200 (it does when the database answers a query).

One image runs every process, so the check first looks for gunicorn among the
container's processes; a container without it (a dispatcher, a one-off
command) has no HTTP server to ask, and the check says so and passes. The
address is gunicorn's own --bind (or GUNICORN_CMD_ARGS's), the Host header one
that ALLOWED_HOSTS accepts. Standard library only: it runs every 30 seconds
and must not start Django.
"""

from __future__ import annotations

import http.client
import os
import shlex
import socket
import sys
from itertools import pairwise
from pathlib import Path

TIMEOUT_SECONDS = 4.0  # under the HEALTHCHECK's --timeout of 5 s
GUNICORN_DEFAULT_BIND = "127.0.0.1:8000"
# What a server listening on every address is reached at from inside.
WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104


def process_argvs() -> list[list[str]]:
    """Every process's argv, lowest pid first (gunicorn's master before its
    workers, which share its command line)."""
    argvs = []
    pids = sorted(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        argvs.append([a.decode(errors="replace") for a in raw.split(b"\0") if a])
    return argvs


def is_gunicorn(argv: list[str]) -> bool:
    """`python -m gunicorn ...` (as `webhook-relay web` runs it), or its script."""
    if any(os.path.basename(a) == "gunicorn" for a in argv[:2]):
        return True
    return any(pair == ("-m", "gunicorn") for pair in pairwise(argv))


def bind_of(args: list[str]) -> str | None:
    """The first address given by -b/--bind, in any of its spellings."""
    for i, arg in enumerate(args):
        if arg in ("-b", "--bind") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--bind="):
            return arg.removeprefix("--bind=")
        if arg.startswith("-b") and not arg.startswith("--") and len(arg) > 2:
            return arg[2:]
    return None


def host_header(allowed_hosts: str) -> str:
    """A Host that Django's ALLOWED_HOSTS (a comma-separated list) accepts."""
    first = next((h.strip() for h in allowed_hosts.split(",") if h.strip()), "")
    if not first:  # the settings' default list starts with 127.0.0.1
        return "127.0.0.1"
    if first == "*":
        return "localhost"
    return first.removeprefix(".")  # ".example.com" accepts example.com


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, *, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def connection(bind: str) -> http.client.HTTPConnection:
    if bind.startswith("unix:"):
        return UnixHTTPConnection(bind.removeprefix("unix:"), timeout=TIMEOUT_SECONDS)
    host, sep, port = bind.rpartition(":")
    if not sep or host.endswith(":") or not port.isdigit():  # no port given
        host, port = bind, "8000"
    host = host.strip("[]")
    return http.client.HTTPConnection(
        WILDCARDS.get(host, host), int(port), timeout=TIMEOUT_SECONDS
    )


def main() -> int:
    argvs = process_argvs()
    web = next((argv for argv in argvs if is_gunicorn(argv)), None)
    if web is None:
        running = " ".join(argvs[0]) if argvs else "nothing"
        print(f"no web server in this container ({running}): no HTTP check applies")
        return 0
    bind = (
        bind_of(web)
        or bind_of(shlex.split(os.environ.get("GUNICORN_CMD_ARGS", "")))
        or GUNICORN_DEFAULT_BIND
    )
    conn = connection(bind)
    try:
        conn.request(
            "GET",
            "/healthz",
            headers={"Host": host_header(os.environ.get("ALLOWED_HOSTS", ""))},
        )
        response = conn.getresponse()
        body = response.read(200).decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        print(f"unhealthy: GET /healthz on {bind} failed: {exc!r}")
        return 1
    finally:
        conn.close()
    if response.status != 200:
        print(f"unhealthy: GET /healthz on {bind} answered {response.status} {body}")
        return 1
    print(f"healthy: GET /healthz on {bind} answered 200")
    return 0


if __name__ == "__main__":
    sys.exit(main())
