"""A real gunicorn with the shipped gunicorn.conf.py, its access log on: no
line of its logs, nor of Django's behind it, carries a portal link token,
used or unknown."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from endpoints import portal_links
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.processes import ROOT, child_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gunicorn(transactional_db, tmp_path: Path):
    port = _free_port()
    logs = {name: tmp_path / f"{name}.log" for name in ("access", "error", "out")}
    env = child_env()
    env.update(DEBUG="true", ALLOWED_HOSTS="127.0.0.1", LOG_FORMAT="json")
    with logs["out"].open("wb") as out:
        popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "relayproject.wsgi",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{port}",
                # The request line, the Referer and the path.
                "--access-logfile",
                str(logs["access"]),
                "--access-logformat",
                '%(h)s %(t)s "%(r)s" %(s)s "%(f)s" %(U)s',
                "--error-logfile",
                str(logs["error"]),
                "--no-control-socket",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{base}/healthz", timeout=10).ok
        except (requests.ConnectionError, requests.Timeout):
            return False

    try:
        wait_until(up, timeout=60, what="gunicorn to answer /healthz")
        yield base, logs
    finally:
        popen.terminate()
        popen.wait(timeout=30)


def test_no_gunicorn_or_django_line_carries_a_link_token(gunicorn):
    base, logs = gunicorn
    _, used = portal_links.portal_link_create(
        merchant=factories.merchant("acme"),
        role="viewer",
        created_by="test",
        now=utcnow(),
    )
    unknown = "never-made-" + used[11:]
    session = requests.Session()

    def link(token: str) -> str:
        return f"{base}/portal/link/{token}/"

    page = session.get(link(used), timeout=10)
    csrf = session.cookies["csrftoken"]
    headers = {"Referer": link(used), "X-CSRFToken": csrf}
    opened = session.post(link(used), headers=headers, allow_redirects=False)
    again = requests.post(link(used), timeout=10)  # no CSRF cookie: 403
    gone = session.post(link(used), headers=headers, timeout=10)
    missing = session.post(link(unknown), headers=headers, timeout=10)
    # A page fetched from the link page sends the link as its Referer.
    session.get(f"{base}/portal/theme.css", headers={"Referer": link(unknown)})

    assert (page.status_code, opened.status_code, again.status_code) == (
        200,
        302,
        403,
    )
    assert (gone.status_code, missing.status_code) == (410, 404)
    wait_until(
        lambda: logs["access"].read_text().count("\n") >= 6,
        timeout=10,
        what="the access log lines",
    )
    text = {name: path.read_text() for name, path in logs.items()}
    assert "/portal/link/[redacted]/" in text["access"]
    # Django's own request lines, JSON, through the root handler.
    assert '"Gone: /portal/link/[redacted]/"' in text["out"]
    assert '"Not Found: /portal/link/[redacted]/"' in text["out"]
    for name, content in text.items():
        for token in (used, unknown):
            assert token not in content, f"{name} log holds a token"
