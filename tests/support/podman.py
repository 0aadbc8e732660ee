"""podman for the container tests: the image built from the Containerfile on the
local base (.ci/base-image), and containers run from it on the host's network.

podman runs with .ci/containers.conf (runc, no default ulimits: what this
sandbox needs) unless CONTAINERS_CONF names another. Every container and
image a test makes carries a name of its own, and is removed by it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = ROOT / ".ci" / "containers.conf"
BASE_SCRIPT = ROOT / ".ci" / "base-image"
# The base the tests build on: the image .ci/base-image makes from Debian's
# packages, unless RELAY_TEST_IMAGE_BASE names another (python:3.11-slim
# where a registry is reachable).
LOCAL_BASE = "localhost/webhook-relay-base:bookworm"
BUILD_TIMEOUT_SECONDS = 900  # a cold build with an empty pip cache is ~2 min
RUN_TIMEOUT_SECONDS = 120


def missing() -> str:
    """Why the container tests cannot run here ("" when they can)."""
    if not shutil.which("podman"):
        return "podman is missing (apt-get install podman runc uidmap debootstrap)"
    if not os.environ.get("RELAY_TEST_IMAGE_BASE") and not shutil.which("debootstrap"):
        return "debootstrap is missing, to make the local base image (apt-get install debootstrap)"
    return ""


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    return env


def podman(
    *args: str, check: bool = True, timeout: float = RUN_TIMEOUT_SECONDS
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["podman", *args],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args[:3])} ... exited {result.returncode}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def base_image() -> str:
    """The base to build on; the local one is made first when missing."""
    if base := os.environ.get("RELAY_TEST_IMAGE_BASE"):
        return base
    subprocess.run(
        [str(BASE_SCRIPT)],
        env=environment(),
        check=True,
        capture_output=True,
        timeout=BUILD_TIMEOUT_SECONDS,
    )
    return LOCAL_BASE


def pip_secrets(workdir: Path) -> list[str]:
    """The build's pip finds what this machine's pip finds: its CA bundle (a
    TLS-intercepting proxy's CA, here) as the secret pip_ca, and its http(s)
    index URLs, if it sets any, as the secret pip_conf. Local paths
    (file:// indexes, find-links) mean nothing inside the build."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    config: dict[str, str] = {}
    for line in listed.splitlines():
        if match := re.fullmatch(r"[^.]*\.([\w-]+)='(.*)'", line):
            config[match.group(1)] = match.group(2)
    args = []
    if (cert := config.get("cert")) and Path(cert).is_file():
        args += ["--secret", f"id=pip_ca,src={cert}"]
    urls = {
        key: " ".join(u for u in config.get(key, "").split() if u.startswith("http"))
        for key in ("index-url", "extra-index-url")
    }
    if any(urls.values()):
        conf = workdir / "pip.conf"
        conf.write_text(
            "[global]\n" + "".join(f"{k} = {v}\n" for k, v in urls.items() if v)
        )
        args += ["--secret", f"id=pip_conf,src={conf}"]
    return args


def build(tag: str, *, workdir: Path, target: str | None = None) -> None:
    """podman build of the Containerfile at the top of the tree (docker format,
    so the HEALTHCHECK is kept), reusing the layer cache."""
    podman(
        "build",
        "--format",
        "docker",
        "--build-arg",
        f"BASE={base_image()}",
        *pip_secrets(workdir),
        *(["--target", target] if target else []),
        "--tag",
        tag,
        "--file",
        str(ROOT / "Containerfile"),
        str(ROOT),
        timeout=BUILD_TIMEOUT_SECONDS,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Container:
    """One detached container on the host's network, read-only but /tmp,
    with its settings from an env file (never on a command line)."""

    def __init__(self, image: str, command: list[str], *, env_file: Path) -> None:
        self.name = unique("relay-test")
        podman(
            "run",
            "--detach",
            "--name",
            self.name,
            "--network",
            "host",
            "--read-only",
            "--env-file",
            str(env_file),
            image,
            *command,
        )

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, check=False)

    def healthcheck(self) -> subprocess.CompletedProcess[str]:
        return podman("healthcheck", "run", self.name, check=False)

    def last_health_output(self) -> str:
        return podman(
            "inspect", "--format", "{{json .State.Health.Log}}", self.name
        ).stdout

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def running(self) -> bool:
        state = podman("inspect", "--format", "{{.State.Running}}", self.name)
        return state.stdout.strip() == "true"

    def terminate(self, *, timeout: float = 60) -> int:
        """SIGTERM, then the exit code once the container has stopped."""
        podman("kill", "--signal", "TERM", self.name)
        return int(podman("wait", self.name, timeout=timeout).stdout.strip())

    def remove(self) -> None:
        podman("rm", "--force", "--time", "0", self.name, check=False)
