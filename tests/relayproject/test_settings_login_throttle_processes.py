"""The admin throttle counts across web processes: two real gunicorn servers, one count."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User

from tests.support.processes import ROOT, child_env

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

PASSWORD = "correct horse battery staple"


class Gunicorn:
    """`gunicorn relayproject.wsgi` on a free loopback port, logs to a file."""

    def __init__(self, logs: Path) -> None:
        self.log = logs
        with logs.open("wb") as out:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "relayproject.wsgi",
                    "--workers",
                    "1",
                    "--bind",
                    "127.0.0.1:0",
                ],
                cwd=ROOT,
                env=child_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.base = f"http://127.0.0.1:{self._port()}"

    def _port(self) -> int:
        deadline = time.monotonic() + 90  # a loaded machine starts slowly
        while time.monotonic() < deadline:
            found = re.search(
                r"Listening at: http://127\.0\.0\.1:(\d+)", self.log.read_text()
            )
            if found:
                return int(found.group(1))
            assert self.popen.poll() is None, self.log.read_text()
            time.sleep(0.05)
        raise AssertionError(f"gunicorn did not start:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(10)


def admin_sign_in(base: str, password: str) -> requests.Response:
    session = requests.Session()
    form = session.get(f"{base}/admin/login/", timeout=60)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    return session.post(
        f"{base}/admin/login/?next=/admin/",
        data={"username": "root", "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/admin/login/"},
        allow_redirects=False,
        timeout=60,
    )


def test_admin_login_locks_after_five_failures_across_two_processes(
    transactional_db, tmp_path
):
    User.objects.create_superuser("root", password=PASSWORD)
    servers = [Gunicorn(tmp_path / f"gunicorn-{n}.log") for n in range(2)]
    try:
        a, b = (server.base for server in servers)
        # Eight wrong passwords spread over both processes (as in the report),
        # never five at either one.
        statuses = [admin_sign_in(base, "wrong").status_code for base in [a, b] * 4]
        assert statuses[:4] == [200] * 4  # wrong password: the form again
        assert set(statuses[4:]) == {429}
        for base in (a, b):
            locked = admin_sign_in(base, PASSWORD)
            assert locked.status_code == 429
            assert "sessionid" not in locked.cookies
    finally:
        for server in servers:
            server.stop()
