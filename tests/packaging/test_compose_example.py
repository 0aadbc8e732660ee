"""deploy/compose.yaml, run with podman-compose: PostgreSQL, `migrate`, the web
server and a dispatcher from the image, on a network of the project's own.

No registry is reachable here, so PostgreSQL's image is a stand-in made from
Debian's packages (tests/packaging/postgres/, kept as a cache like the base),
started as the official one is. Debian's podman (4.3) cannot wait on a
container's health, and podman-compose then ignores depends_on's conditions
(it says so): the test starts the services in the order they give, postgres
once it answers, migrate to its end, then web and dispatcher. The project's
containers, network and volume are removed at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests
from cryptography.fernet import Fernet

from tests.support import podman
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.container,
    # The first test may wait for the image and the stand-in's build.
    pytest.mark.timeout(podman.BUILD_TIMEOUT_SECONDS + 300),
]

COMPOSE_FILE = podman.ROOT / "deploy" / "compose.yaml"
POSTGRES_CONTEXT = podman.ROOT / "tests" / "packaging" / "postgres"
POSTGRES_IMAGE = "localhost/webhook-relay-test-postgres:15"
START_SECONDS = 60


class Compose:
    """podman-compose on deploy/compose.yaml, as one project of its own."""

    def __init__(self, *, env: dict[str, str]) -> None:
        self.project = podman.unique("relay-compose")
        self.env = {**podman.environment(), **env}

    def __call__(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "podman_compose", "-p", self.project]
            + ["-f", str(COMPOSE_FILE), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=podman.RUN_TIMEOUT_SECONDS,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"podman-compose {' '.join(args)} exited {result.returncode}\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result.stdout

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"


def postgres_answers(compose: Compose) -> bool:
    ready = podman.podman(
        "exec",
        compose.container("postgres"),
        "pg_isready",
        "-U",
        "relay",
        "-q",
        check=False,
    )
    return ready.returncode == 0


def healthz_answers(port: str) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).ok
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def port() -> str:
    return str(podman.free_port())


@pytest.fixture(scope="module")
def compose(relay_image, port):
    podman.podman(
        "build",
        "--build-arg",
        f"BASE={podman.base_image()}",
        "--tag",
        POSTGRES_IMAGE,
        str(POSTGRES_CONTEXT),
        timeout=podman.BUILD_TIMEOUT_SECONDS,
    )
    compose = Compose(
        env={
            "RELAY_IMAGE": relay_image,
            "POSTGRES_IMAGE": POSTGRES_IMAGE,
            "POSTGRES_PASSWORD": Fernet.generate_key().decode()[:24],
            "SECRET_KEY": Fernet.generate_key().decode(),
            "RELAY_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
            "RELAY_PORT": port,
            # Plain HTTP on loopback: no TLS in front of it here.
            "SECURE_SSL_REDIRECT": "false",
        }
    )
    try:
        compose("up", "--detach", "postgres")
        wait_until(
            lambda: postgres_answers(compose), timeout=START_SECONDS, what="postgres"
        )
        compose("run", "--rm", "migrate")
        compose("up", "--detach", "--no-deps", "web", "dispatcher")
        wait_until(
            lambda: healthz_answers(port),
            timeout=START_SECONDS,
            what="the web service on its published port",
        )
        yield compose
    finally:
        compose("down", "--volumes", check=False)


def alive_dispatchers(compose: Compose) -> list[bool]:
    status = podman.podman(
        "exec", compose.container("web"), "webhook-relay", "status", "--json"
    )
    return [p["alive"] for p in json.loads(status.stdout)["dispatchers"]["processes"]]


def test_the_compose_example_serves_the_api_and_runs_a_dispatcher(compose, port):
    health = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    assert health.json() == {"status": "ok"}
    # The dispatcher reached the database by the service's name, as web did.
    wait_until(
        lambda: alive_dispatchers(compose) == [True],
        timeout=START_SECONDS,
        what="one live dispatcher in relay_status",
    )


def test_stopping_the_compose_example_stops_web_and_dispatcher_with_exit_0(compose):
    compose("stop")
    for service in ("web", "dispatcher"):
        code = podman.podman(
            "inspect", "--format", "{{.State.ExitCode}}", compose.container(service)
        )
        assert code.stdout.strip() == "0", podman.podman(
            "logs", compose.container(service)
        ).stderr[-3000:]
