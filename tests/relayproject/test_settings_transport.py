"""Production settings: check --deploy is clean; forwarded headers only from trusted proxies."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.test import Client

from tests.support.processes import ROOT


def production_env(tmp_path, **extra: str) -> dict[str, str]:
    """The environment of the docs' production example (docs/pages/operations/index.md)."""
    # Nothing from this test run's environment (DEBUG=true, browser flags).
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="relay.example.com",
        DATABASE_URL=f"sqlite:///{tmp_path / 'prod.sqlite3'}",
        RELAY_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
    )
    env.update(extra)
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run_python("manage.py", *args, env=env)


def run_python(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_with_the_readme_production_environment_is_clean(tmp_path):
    done = manage(
        "check", "--deploy", "--fail-level", "WARNING", env=production_env(tmp_path)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_debug_is_off_unless_asked_for(tmp_path):
    env = production_env(tmp_path)
    del env["DEBUG"]
    done = manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.DEBUG)",
        env=env,
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr


def test_production_refuses_to_start_without_an_encryption_key(tmp_path):
    env = production_env(tmp_path)
    del env["RELAY_ENCRYPTION_KEYS"]
    done = manage("check", env=env)
    assert done.returncode != 0
    assert "Set RELAY_ENCRYPTION_KEYS" in done.stderr


def test_a_malformed_encryption_key_is_refused_at_start(tmp_path):
    done = manage("check", env=production_env(tmp_path, RELAY_ENCRYPTION_KEYS="abc"))
    assert done.returncode != 0
    assert "endpoints.E002" in done.stderr and "is not a Fernet key" in done.stderr


def test_the_key_check_is_a_security_check_that_check_deploy_reports(tmp_path):
    env = production_env(tmp_path, RELAY_ENCRYPTION_KEYS="")
    done = manage("check", "--deploy", "--tag", "security", env=env)
    assert done.returncode != 0
    assert (
        "endpoints.E001" in done.stderr and "Set RELAY_ENCRYPTION_KEYS" in done.stderr
    )


def test_the_web_process_refuses_a_bad_key_though_gunicorn_runs_no_checks(tmp_path):
    # What gunicorn does at start: import the WSGI application.
    load = "import relayproject.wsgi; print('loaded')"
    good = run_python("-c", load, env=production_env(tmp_path))
    assert good.returncode == 0 and "loaded" in good.stdout, good.stderr
    bad = run_python(
        "-c", load, env=production_env(tmp_path, RELAY_ENCRYPTION_KEYS="abc")
    )
    assert bad.returncode != 0 and "loaded" not in bad.stdout
    assert "endpoints.E002" in bad.stderr


def test_the_dispatcher_refuses_a_bad_key(tmp_path):
    env = production_env(tmp_path)
    del env["RELAY_ENCRYPTION_KEYS"]
    # Were the check skipped, the dispatcher would run until the timeout.
    done = manage("run_dispatcher", env=env)
    assert done.returncode != 0
    assert (
        "endpoints.E001" in done.stderr and "Set RELAY_ENCRYPTION_KEYS" in done.stderr
    )


@pytest.fixture
def production_like(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.TRUSTED_PROXIES = ["10.0.0.2"]
    return settings


@pytest.mark.django_db
def test_forwarded_proto_from_anyone_is_not_https(production_like):
    response = Client().get(
        "/portal/login/", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_PROTO="https"
    )
    assert response.status_code == 301
    assert response["Location"].startswith("https://")


@pytest.mark.django_db
def test_forwarded_proto_from_a_trusted_proxy_is_https_with_hsts(production_like):
    response = Client().get(
        "/portal/login/",
        REMOTE_ADDR="10.0.0.2",
        HTTP_X_FORWARDED_PROTO="https",
        HTTP_X_FORWARDED_FOR="203.0.113.9",
    )
    assert response.status_code == 200
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")


@pytest.mark.django_db
def test_health_checks_stay_reachable_over_plain_http(production_like):
    production_like.SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    assert Client().get("/healthz").status_code == 200
