"""A live relay for the client library: gunicorn on 127.0.0.1 over the test
database, and dispatcher processes when a test needs webhooks sent.

One gunicorn serves a whole module (it starts in seconds, each test's rows
are its own): the tests use merchants of their own (factories.merchant()
names each anew), so nothing a worker keeps from one test meets the next.
"""

from __future__ import annotations

import pytest
from webhook_relay_client import Client

from endpoints.apikeys import apikey_create
from tests.acceptance.test_web_processes import Web
from tests.support.processes import Dispatchers, wait_until


class Sleeps(list):
    """The client's sleep seam: records each wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture(scope="module")
def relay(django_db_setup, tmp_path_factory):
    server = Web(tmp_path_factory.mktemp("relay"), workers=1)
    try:
        wait_until(server.up, timeout=60, what="gunicorn to answer /healthz")
        yield server
    finally:
        server.close()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def relay_client(relay, transactional_db, sleeps) -> Client:
    """A client with a platform key; its retries wait on `sleeps`, not the clock."""
    _, key = apikey_create(name="client library")
    return Client(relay.url("/"), key, sleep=sleeps)


@pytest.fixture
def dispatchers(transactional_db, tmp_path):
    started = Dispatchers(tmp_path)
    yield started
    started.close()
