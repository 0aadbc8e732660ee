"""The shipped gunicorn config believes X-Forwarded-Proto only from TRUSTED_PROXIES.

A real `gunicorn relayproject.wsgi`, started in the project folder as the
docs say (docs/pages/operations/proxy.md), with the production settings (so plain HTTP is redirected to
HTTPS): a loopback peer that is not a trusted proxy claims https and is
redirected all the same; listed in TRUSTED_PROXIES, it is believed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.relayproject.test_settings_transport import production_env
from tests.support.processes import ROOT

pytestmark = [pytest.mark.acceptance]

HOST = "relay.example.com"  # the ALLOWED_HOSTS of production_env
PATH = "/api/v1/openapi.json"  # answers without the database


class Gunicorn:
    def __init__(self, log: Path, env: dict[str, str]) -> None:
        self.log = log
        with log.open("wb") as out:
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
                env=env,
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
            time.sleep(0.05)  # polling a log file, not synchronising threads
        raise AssertionError(f"gunicorn did not start:\n{self.log.read_text()}")

    def get(self, path: str, **headers: str) -> requests.Response:
        return requests.get(
            f"{self.base}{path}",
            headers={"Host": HOST, **headers},
            allow_redirects=False,
            timeout=60,
        )

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(10)


@pytest.fixture
def gunicorn(tmp_path):
    started: list[Gunicorn] = []

    def start(trusted: str) -> Gunicorn:
        env = production_env(tmp_path, TRUSTED_PROXIES=trusted)
        server = Gunicorn(tmp_path / f"gunicorn-{len(started)}.log", env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.mark.parametrize("trusted", ["", "10.0.0.5,192.0.2.0/24"])
def test_an_untrusted_loopback_peer_cannot_claim_https(gunicorn, trusted):
    server = gunicorn(trusted)

    for header in ("X-Forwarded-Proto", "X-Forwarded-Ssl", "X-Forwarded-Protocol"):
        value = {"X-Forwarded-Proto": "https", "X-Forwarded-Ssl": "on"}.get(
            header, "ssl"
        )
        response = server.get(PATH, **{header: value})

        # Still plain HTTP: sent to HTTPS, and no HSTS on a plain answer.
        assert response.status_code == 301, (header, response.status_code)
        assert response.headers["Location"] == f"https://{HOST}{PATH}"
        assert "Strict-Transport-Security" not in response.headers


# 127.0.0.1/8 has host bits set: the middleware accepts it, so gunicorn must.
@pytest.mark.parametrize("trusted", ["127.0.0.1", "10.0.0.5,127.0.0.1/8"])
def test_a_trusted_proxy_is_believed(gunicorn, trusted):
    server = gunicorn(trusted)

    response = server.get(PATH, **{"X-Forwarded-Proto": "https"})

    assert response.status_code == 200
    assert "Strict-Transport-Security" in response.headers
    assert response.json()["info"]["title"]
