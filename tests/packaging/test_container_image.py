"""The container image (Containerfile), built with podman and run as a user runs it.

The image is built on the local Debian base (.ci/base-image) with the layer
cache; `migrate`, the web server and a dispatcher run from it against this
machine's PostgreSQL, on a database of this module's own, over the host's
network (--network host), with production settings (DEBUG off). An event
published through the web container's API reaches a real receiver on
127.0.0.1, signed. The image, its containers and the database are removed at
the end. Without podman the module skips, saying why; in CI it fails.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import requests
from cryptography.fernet import Fernet
from psycopg import sql
from standardwebhooks import Webhook

from tests.support import podman
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.container,
    # The first test waits for the image: a cold build (and a base image made
    # first, away from CI) takes minutes.
    pytest.mark.timeout(podman.BUILD_TIMEOUT_SECONDS + 300),
]

UID = "10001"  # the Containerfile's user
# Only these hosts are allowed: the health check has to send one of them.
ALLOWED_HOSTS = ".relay.test"
HOST = "api.relay.test"
START_SECONDS = 60  # a container's first answer, on a busy 2-core machine


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("container")


@pytest.fixture(scope="module")
def database_url():
    """A database of this module's own on the test server, dropped after."""
    server = os.environ["TEST_DATABASE_URL"]
    name = podman.unique("relay_image").replace("-", "_")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)
            )
        )


def write_env(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


@pytest.fixture(scope="module")
def relay_env(database_url) -> dict[str, str]:
    """Production settings: DEBUG off, so a real SECRET_KEY and encryption key."""
    return {
        "DATABASE_URL": database_url,
        "SECRET_KEY": Fernet.generate_key().decode(),
        "RELAY_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": ALLOWED_HOSTS,
        # Plain HTTP on loopback: no TLS in front of it here.
        "SECURE_SSL_REDIRECT": "false",
        "RELAY_ALLOW_PRIVATE_DESTINATIONS": "true",
        "HOST": "127.0.0.1",
        "PORT": str(podman.free_port()),
    }


@pytest.fixture(scope="module")
def env_file(workdir, relay_env) -> Path:
    return write_env(workdir / "relay.env", relay_env)


def run_once(relay_image: str, env_file: Path, *command: str) -> str:
    """A one-off container (`podman run --rm IMAGE command`); its stdout."""
    return podman.podman(
        "run",
        "--rm",
        "--network",
        "host",
        "--read-only",
        "--env-file",
        str(env_file),
        relay_image,
        *command,
    ).stdout


@pytest.fixture(scope="module")
def migrated(relay_image, env_file) -> str:
    return run_once(relay_image, env_file, "migrate", "--noinput")


@pytest.fixture(scope="module")
def api(relay_env, migrated, relay_image, env_file) -> requests.Session:
    """A platform API key made with the image's create_api_key, on a session
    that talks to the web container as one of its ALLOWED_HOSTS."""
    key = run_once(relay_image, env_file, "create_api_key", "--name", "image-test")
    session = requests.Session()
    session.headers.update(
        {"Authorization": f"Bearer {key.strip().splitlines()[-1]}", "Host": HOST}
    )
    return session


def origin(relay_env) -> str:
    return f"http://127.0.0.1:{relay_env['PORT']}"


def answers(session: requests.Session, url: str, *, status: int = 200) -> bool:
    try:
        return session.get(url, timeout=5).status_code == status
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def web(relay_image, env_file, relay_env, migrated):
    container = podman.Container(relay_image, ["web"], env_file=env_file)
    session = requests.Session()
    session.headers["Host"] = HOST
    try:
        wait_until(
            lambda: answers(session, f"{origin(relay_env)}/healthz"),
            timeout=START_SECONDS,
            what=f"the web container to answer\n{container.logs()[-2000:]}",
        )
        yield container
    finally:
        container.remove()


def heartbeats(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT count(*) FROM deliveries_dispatcherheartbeat"
        ).fetchone()[0]


@pytest.fixture(scope="module")
def dispatcher(relay_image, env_file, database_url, migrated):
    container = podman.Container(relay_image, ["dispatcher"], env_file=env_file)
    try:
        # Its heartbeat starts after its signal handlers are in place.
        wait_until(
            lambda: heartbeats(database_url) == 1,
            timeout=START_SECONDS,
            what=f"the dispatcher's heartbeat\n{container.logs()[-2000:]}",
        )
        yield container
    finally:
        container.remove()


def test_the_image_runs_as_a_non_root_user(relay_image):
    configured = podman.podman(
        "image", "inspect", "--format", "{{.Config.User}}", relay_image
    )
    assert configured.stdout.strip() == f"{UID}:{UID}"
    ran = podman.podman("run", "--rm", "--entrypoint", "id", relay_image, "-u")
    assert ran.stdout.strip() == UID


def test_the_final_image_carries_no_build_tools(relay_image):
    script = (
        "for tool in gcc cc make pip pip3; do command -v $tool; done;"
        " for module in pip setuptools hatchling; do"
        '  python3 -c "import $module" 2>/dev/null && echo $module; done;'
        " ls -d /src /dist /opt/build 2>/dev/null; true"
    )
    found = podman.podman(
        "run", "--rm", "--entrypoint", "sh", relay_image, "-c", script
    )
    assert found.stdout.split() == []


def test_the_build_context_holds_only_what_the_package_is_built_from(build_dir):
    # The builder stage's /src is the build context less .dockerignore: never
    # the virtualenv, git, database files or the development key.
    tag = f"localhost/{podman.unique('webhook-relay-builder')}:test"
    podman.build(tag, workdir=build_dir, target="builder")
    try:
        listed = podman.podman(
            "run", "--rm", "--entrypoint", "sh", tag, "-c", "cd /src && ls -A"
        )
    finally:
        podman.podman("rmi", "--force", tag, check=False)
    assert sorted(listed.stdout.split()) == [
        "README.md",
        "deliveries",
        "deploy",
        "endpoints",
        "pyproject.toml",
        "relayproject",
        "requirements.txt",
        "templates",
    ]


def test_migrate_from_the_image_leaves_nothing_unapplied(
    migrated, relay_image, env_file
):
    plan = run_once(relay_image, env_file, "showmigrations", "--plan")
    assert "[X]" in plan
    assert "[ ]" not in plan


def test_an_event_published_to_the_web_container_reaches_the_receiver_signed(
    api, relay_env, web, dispatcher, receiver
):
    base = f"{origin(relay_env)}/api/v1"
    created = api.post(f"{base}/merchants", json={"slug": "acme", "name": "Acme"})
    assert created.status_code == 201, created.text
    endpoint = api.post(f"{base}/merchants/acme/endpoints", json={"url": receiver.url})
    assert endpoint.status_code == 201, endpoint.text
    event = api.post(
        f"{base}/events",
        json={"merchant": "acme", "type": "order.paid", "data": {"order": 8812}},
    )
    assert event.status_code == 201, event.text

    (got,) = receiver.wait_for(1, timeout=30)

    assert got.json["data"] == {"order": 8812}
    headers = {name.lower(): value for name, value in got.headers.items()}
    assert headers["webhook-id"] == event.json()["id"]
    Webhook(endpoint.json()["secret"]).verify(got.body, headers)


def test_the_web_server_starts_without_an_error_on_a_read_only_root(web):
    logs = web.logs()
    assert "Listening at: http://127.0.0.1:" in logs
    assert "[ERROR]" not in logs


def test_the_healthcheck_passes_in_the_web_container(web):
    checked = web.healthcheck()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "healthy: GET /healthz" in web.last_health_output()


def test_the_healthcheck_fails_when_the_database_does_not_answer(
    relay_image, workdir, relay_env, database_url
):
    gone = urlunsplit(urlsplit(database_url)._replace(path="/no_such_database"))
    port = podman.free_port()
    env_file = write_env(
        workdir / "no-database.env",
        {**relay_env, "DATABASE_URL": gone, "PORT": str(port)},
    )
    container = podman.Container(relay_image, ["web"], env_file=env_file)
    session = requests.Session()
    session.headers["Host"] = HOST
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        wait_until(
            lambda: answers(session, url, status=503),
            timeout=START_SECONDS,
            what="the web container to answer",
        )
        checked = container.healthcheck()
        output = container.last_health_output()
    finally:
        container.remove()
    assert checked.returncode == 1
    assert "answered 503" in output


def test_the_healthcheck_passes_in_a_dispatcher_container_and_says_why(dispatcher):
    checked = dispatcher.healthcheck()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no web server in this container" in dispatcher.last_health_output()


def test_sigterm_stops_the_web_and_dispatcher_containers_with_exit_0(
    web, dispatcher, database_url
):
    assert web.terminate() == 0, web.logs()[-3000:]
    assert dispatcher.terminate() == 0, dispatcher.logs()[-3000:]
    # A clean stop deletes the dispatcher's heartbeat row.
    assert heartbeats(database_url) == 0
    assert "stopped:" in dispatcher.logs()
