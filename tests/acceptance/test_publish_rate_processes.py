"""The publish rate is one bucket per merchant for every web process: two
gunicorn servers (one worker each) share it, through PostgreSQL."""

from __future__ import annotations

import pytest
import requests

from deliveries.models import Event
from endpoints.apikeys import apikey_create
from tests.acceptance.test_web_processes import Web
from tests.support import factories
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]


@pytest.fixture
def two_servers(transactional_db, tmp_path):
    servers = []
    try:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            servers.append(Web(tmp_path / name, workers=1))
        for server in servers:
            wait_until(server.up, timeout=60, what="gunicorn to answer /healthz")
        yield servers
    finally:
        for server in servers:
            server.close()


def _publish(server: Web, key: str, count: int) -> requests.Response:
    events = [{"merchant": "acme", "type": "order.paid", "data": {}}] * count
    return requests.post(
        server.url("/api/v1/events/batch"),
        json={"events": events},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_two_web_servers_take_from_one_bucket(two_servers):
    merchant = factories.merchant("acme")
    merchant.publish_rate_per_second = 0.01  # a token in 100 s
    merchant.publish_burst = 4
    merchant.save()
    factories.endpoint(merchant)
    _, key = apikey_create(name="web", merchant=merchant)
    a, b = two_servers

    assert _publish(a, key, 2).status_code == 201
    assert _publish(b, key, 2).status_code == 201
    # Each server has served two events; the merchant has had its four.
    for server in (a, b):
        refused = _publish(server, key, 1)
        assert refused.status_code == 429, refused.text
        assert refused.headers["Content-Type"].startswith("application/problem+json")
        assert 99 <= int(refused.headers["Retry-After"]) <= 100
    assert Event.objects.count() == 4
