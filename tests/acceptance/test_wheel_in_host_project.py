"""The package as users get it: the wheel built from this tree, installed in a
fresh virtualenv, run as the standalone `webhook-relay` and inside a Django
project of someone else's (host_project/: its own user model, models and
admin, the relay's URLs under /relay/).

The wheel and the virtualenv are made once per module: `python -m build`
(which fetches hatchling), then pip installs the wheel from its own metadata,
held to requirements.txt's pins so the versions are the ones CI tests. The
host project gets a PostgreSQL database of its own, dropped after. The whole
module takes 80 to 120 s on a busy 2-core machine, most of it building and
installing.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import requests
from cryptography.fernet import Fernet
from psycopg.conninfo import conninfo_to_dict

import relayproject
from tests.support.processes import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

HOST_PROJECT = Path(__file__).parent / "host_project"


@dataclass
class Venv:
    path: Path
    home: Path

    def bin(self, name: str) -> str:
        return str(self.path / "bin" / name)

    def env(self, **extra: str) -> dict[str, str]:
        """Nothing of this test run's environment: no DJANGO_SETTINGS_MODULE,
        TEST_DATABASE_URL or PYTHONPATH that would lead back to the tree."""
        return {
            "PATH": f"{self.path / 'bin'}:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            **extra,
        }

    def run(
        self, *args: str, cwd: Path, env: dict[str, str], check: bool = True
    ) -> subprocess.CompletedProcess:
        done = subprocess.run(
            args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180
        )
        if check:
            assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
        return done


def _constraints(target: Path) -> Path:
    # requirements.txt's pins, without the extras pip refuses in constraints.
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    pins = [re.sub(r"\[.*?\]", "", line) for line in lines if "==" in line]
    target.write_text("\n".join(pins) + "\n")
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert [p.name for p in out.glob("*.tar.gz")] == ["webhook_relay-0.1.0.tar.gz"]
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Venv:
    base = tmp_path_factory.mktemp("venv")
    made = Venv(base / "venv", base)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(made.path)], check=True
    )
    installed = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", made.bin("python")),
            *("install", "--quiet", "--disable-pip-version-check"),
            *("--constraint", str(_constraints(base / "constraints.txt"))),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return made


@dataclass
class HostProject:
    venv: Venv
    folder: Path
    env: dict[str, str]
    database: dict

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.venv.run(
            self.venv.bin("python"),
            "manage.py",
            *args,
            cwd=self.folder,
            env=self.env,
            check=check,
        )

    def rows(self, sql: str) -> list[tuple]:
        with psycopg.connect(**self.database) as c:
            return c.execute(sql).fetchall()


@pytest.fixture(scope="module")
def host(venv, tmp_path_factory):
    """The host project, copied out of the tree, migrated on a new database."""
    server = conninfo_to_dict(os.environ["TEST_DATABASE_URL"])
    name = f"relay_host_{secrets.token_hex(6)}"
    with psycopg.connect(**{**server, "dbname": "postgres"}, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    folder = tmp_path_factory.mktemp("host") / "project"
    shutil.copytree(HOST_PROJECT, folder, ignore=shutil.ignore_patterns("__pycache__"))
    env = venv.env(
        SECRET_KEY=secrets.token_urlsafe(50),
        RELAY_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        HOST_DB_NAME=name,
        HOST_DB_USER=server.get("user", ""),
        HOST_DB_PASSWORD=server.get("password", ""),
        HOST_DB_HOST=server.get("host", "127.0.0.1"),
        HOST_DB_PORT=str(server.get("port", 5432)),
    )
    project = HostProject(venv, folder, env, {**server, "dbname": name})
    try:
        project.manage("makemigrations", "shop")
        project.manage("migrate", "--no-input")
        yield project
    finally:
        with psycopg.connect(**{**server, "dbname": "postgres"}, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_host_has_no_migration_to_make_for_the_relay(host):
    checked = host.manage("makemigrations", "--check", "--dry-run")
    assert "No changes detected" in checked.stdout


def test_an_event_commits_and_rolls_back_with_the_hosts_rows(host, receiver):
    placed = host.manage("shop_orders", "--receiver", receiver.url)
    kept = json.loads(placed.stdout)["committed_order"]
    assert host.rows("SELECT id FROM shop_order") == [(kept,)]
    events = host.rows("SELECT id, data FROM deliveries_event")
    assert [data["order_id"] for _id, data in events] == [kept]

    # A dispatcher from the installed package, with the host's settings.
    host.venv.run(
        host.venv.bin("webhook-relay"),
        *("dispatcher", "--drain"),
        cwd=host.folder,
        env={
            **host.env,
            "DJANGO_SETTINGS_MODULE": "hostsite.settings",
            "PYTHONPATH": str(host.folder),
        },
    )
    bodies = [json.loads(r.body) for r in receiver.received]
    assert [(b["id"], b["type"], b["data"]["order_id"]) for b in bodies] == [
        (events[0][0], "order.placed", kept)
    ]


def test_the_relay_keeps_to_the_hosts_admin_site_and_url_prefix(host):
    found = json.loads(host.manage("shop_pages").stdout)
    admin = found.pop("admin")
    assert admin and set(admin.values()) == {200}, admin
    assert found == {
        "portal_home": "/relay/portal/",
        "pipeline_links_metrics": True,
        # The host's sign-in page (its LOGIN_URL), not the portal's own.
        "portal_anonymous": "/accounts/login/?next=/relay/portal/",
        "healthz": 200,
        "relay_api_text": [415, "application/problem+json"],
        "host_api_text": [200, "hello"],
        "portal_link": [201, "http://testserver/relay/portal/link/"],
        "portal_page": {
            "status": 200,
            "product_name": True,
            "links_under_prefix": True,
            "links_at_root": False,
        },
    }


def test_the_console_command_runs_the_installed_relay_from_the_current_directory(
    venv, tmp_path
):
    where = venv.run(
        venv.bin("python"),
        *("-c", "import relayproject; print(relayproject.__file__)"),
        cwd=tmp_path,
        env=venv.env(),
    )
    assert where.stdout.startswith(str(venv.path)), "the wheel, not the tree"
    version = venv.run(
        venv.bin("webhook-relay"), "--version", cwd=tmp_path, env=venv.env()
    )
    assert version.stdout == f"webhook-relay {relayproject.__version__}\n"

    # Production settings and no DATABASE_URL: SQLite in the current directory.
    env = venv.env(
        SECRET_KEY=secrets.token_urlsafe(50),
        RELAY_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="false",
    )
    venv.run(venv.bin("webhook-relay"), "migrate", cwd=tmp_path, env=env)
    assert (tmp_path / "db.sqlite3").is_file()
    assert not list(venv.path.rglob("db.sqlite3")), "nothing written beside the code"
    status = venv.run(
        venv.bin("webhook-relay"), "status", "--json", cwd=tmp_path, env=env
    )
    assert json.loads(status.stdout)["summary"]["pending"] == 0

    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            [venv.bin("webhook-relay"), "web", "--workers", "1", "--no-control-socket"],
            cwd=tmp_path,
            env={**env, "HOST": "127.0.0.1", "PORT": "0"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{_listening_port(log, web)}"
        health = requests.get(f"{base}/healthz", timeout=30)
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        # The templates and static files the wheel carries.
        assert requests.get(f"{base}/portal/login/", timeout=30).status_code == 200
        css = requests.get(f"{base}/static/portal/portal.css", timeout=30)
        assert css.status_code == 200
    finally:
        web.send_signal(signal.SIGTERM)
        assert web.wait(timeout=60) == 0, log.read_text()


def test_tracing_asked_for_without_the_extra_says_what_to_install(venv, tmp_path):
    env = venv.env(DEBUG="true", OTEL_TRACES_EXPORTER="console")
    done = venv.run(
        venv.bin("webhook-relay"), "check", cwd=tmp_path, env=env, check=False
    )
    assert done.returncode != 0
    assert "install webhook-relay[tracing]" in done.stderr, done.stderr


def _listening_port(log: Path, web: subprocess.Popen) -> int:
    deadline = time.monotonic() + 90  # a loaded machine starts slowly
    while time.monotonic() < deadline:
        found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log.read_text())
        if found:
            return int(found.group(1))
        assert web.poll() is None, log.read_text()
        time.sleep(0.05)  # polling a log file, not synchronising threads
    raise AssertionError(f"gunicorn never listened:\n{log.read_text()}")
