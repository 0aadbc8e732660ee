"""Two real gunicorn workers: an endpoint change is seen by the next publish
in each of them, and each keeps authenticating from its own key cache."""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from django.db import connection

from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.processes import ROOT, child_env, wait_until

pytestmark = [pytest.mark.postgres]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Web:
    """gunicorn with two sync workers; its access log names the worker (pid)
    that served each request, so a test can tell both workers answered."""

    def __init__(
        self, logs: Path, *, workers: int = 2, database_url: str | None = None
    ) -> None:
        self.port = _free_port()
        self.access_log = logs / "access.log"
        env = child_env(database_url=database_url)
        env.update(DEBUG="true", ALLOWED_HOSTS="127.0.0.1")
        self._stderr = (logs / "gunicorn.err").open("wb")
        self.popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "relayproject.wsgi",
                "--workers",
                str(workers),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--access-logfile",
                str(self.access_log),
                "--access-logformat",
                # The worker's pid and the request's mark (a header: the API
                # refuses query parameters it does not declare).
                "%(p)s %({x-test-mark}i)s",
                "--no-control-socket",  # a shared default path; not needed here
            ],
            cwd=ROOT,
            env=env,
            stdout=self._stderr,
            stderr=self._stderr,
        )
        self.sent = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> bool:
        try:
            return requests.get(self.url("/healthz"), timeout=10).ok
        except (requests.ConnectionError, requests.Timeout):
            return False

    def publish_until_both_workers_answer(self, key: str, event: dict) -> list[dict]:
        """Publish in rounds of concurrent requests (one connection each)
        until both workers have served some; every answer, in order."""
        answers: list[dict] = []
        marks: list[str] = []
        for _ in range(20):
            round_marks = [f"r{self.sent + n}" for n in range(6)]
            self.sent += 6
            with ThreadPoolExecutor(6) as pool:
                answers += pool.map(lambda m: self._post(key, event, m), round_marks)
            marks += round_marks
            if len(self._workers(marks)) == 2:
                return answers
        raise AssertionError("one gunicorn worker never answered")

    def _post(self, key: str, event: dict, mark: str) -> dict:
        response = requests.post(
            self.url("/api/v1/events"),
            json=event,
            headers={
                "Authorization": f"Bearer {key}",
                "Connection": "close",
                "X-Test-Mark": mark,
            },
            timeout=30,
        )
        assert response.status_code == 201, response.text
        return response.json()

    def _workers(self, marks: list[str]) -> set[str]:
        wanted = set(marks)
        seen: dict[str, str] = {}

        def logged() -> bool:
            for line in self.access_log.read_text().splitlines():
                pid, _, mark = line.partition(" ")
                if mark in wanted:
                    seen[mark] = pid
            return len(seen) == len(wanted)

        # gunicorn writes the access line just after the answer.
        wait_until(logged, timeout=10, what="access log lines")
        return set(seen.values())

    def close(self) -> None:
        self.popen.terminate()
        self.popen.wait(timeout=30)
        self._stderr.close()


@pytest.fixture
def web(transactional_db, tmp_path):
    server = Web(tmp_path)
    try:
        wait_until(server.up, timeout=60, what="gunicorn to answer /healthz")
        yield server
    finally:
        server.close()


def _targets(answers: list[dict]) -> set[frozenset[str]]:
    return {frozenset(d["endpoint_id"] for d in a["deliveries"]) for a in answers}


def test_every_worker_sees_endpoint_changes_at_the_next_publish(web):
    merchant = factories.merchant("acme")
    first = factories.endpoint(merchant)
    _, key = apikey_create(name="web")
    event = {"merchant": "acme", "type": "order.created", "data": {}}
    assert _targets(web.publish_until_both_workers_answer(key, event)) == {
        frozenset({first.pk})
    }

    created = factories.endpoint(merchant, event_types=["order.*"])
    assert _targets(web.publish_until_both_workers_answer(key, event)) == {
        frozenset({first.pk, created.pk})
    }

    endpoint_update(endpoint=first, is_active=False, now=utcnow())
    assert _targets(web.publish_until_both_workers_answer(key, event)) == {
        frozenset({created.pk})
    }

    endpoint_update(
        endpoint=Endpoint.objects.get(pk=created.pk),
        event_types=["invoice.*"],
        now=utcnow(),
    )
    assert _targets(web.publish_until_both_workers_answer(key, event)) == {frozenset()}


def _end_other_sessions() -> int:
    """pg_terminate_backend every other session on the test database (the
    worker's), as a server restart ends them; wait until they are gone."""
    others = (
        " FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)){others}"
        )
        ended = cursor.fetchone()[0]

    def gone() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*){others}")
            return cursor.fetchone()[0] == 0

    wait_until(gone, timeout=10, what="the ended sessions to go")
    return ended


def test_a_worker_whose_session_the_server_ended_answers_the_next_request(
    transactional_db, tmp_path
):
    # No per-request health check (settings.CONN_HEALTH_CHECKS): the worker
    # sees the ended session on its socket and connects afresh, so not even
    # the first request after the "restart" fails (relayproject/lib/dbsessions.py).
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    _, key = apikey_create(name="web")
    server = Web(tmp_path, workers=1)
    try:
        wait_until(server.up, timeout=60, what="gunicorn to answer /healthz")
        event = {"merchant": "acme", "type": "order.created", "data": {}}
        server._post(key, event, "before")
        for round in range(3):
            assert _end_other_sessions() == 1  # the worker's persistent session
            server._post(key, event, f"after-{round}")  # 201, or it raises
    finally:
        server.close()
