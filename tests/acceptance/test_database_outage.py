"""The database goes away under a working dispatcher and comes back.

A proxy between the dispatcher and the server plays a restart (every
connection dropped, new ones turned away for a while), pg_terminate_backend
drops the dispatcher's own sessions, and in CI (.ci/run sets
RELAY_TEST_RESTART_POSTGRES=1) the real PostgreSQL server is restarted too.
On a developer's machine the server is shared with other work, so that case
is not collected there at all.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from django.db import connection

from deliveries.models import Delivery
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support.fakes import Reply
from tests.support.processes import (
    dispatcher_database_url,
    publish_fan_out,
    received_per_delivery,
    unfinished,
    wait_until,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]


def restart_through_proxy(proxy: TcpProxy) -> None:
    proxy.cut()
    # Down until the dispatcher has come back twice (it backed off in between)
    # and been turned away: about the 1.5 s of its first two back-offs.
    assert proxy.wait_for_refusals(2, timeout=15)
    proxy.resume()


def terminate_backends(_proxy: TcpProxy) -> None:
    def others() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return [pid for (pid,) in cursor.fetchall()]

    wait_until(lambda: bool(others()), timeout=10, what="the dispatcher's session")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))"
            " FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1


def restart_server(_proxy: TcpProxy) -> None:
    (version,) = [p.name for p in Path("/etc/postgresql").iterdir()]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        timeout=120,
    )
    connection.close()  # the test's own session died with the server


OUTAGES = [restart_through_proxy, terminate_backends]
if os.environ.get("RELAY_TEST_RESTART_POSTGRES") == "1":
    OUTAGES.append(restart_server)


@pytest.mark.parametrize("outage", OUTAGES, ids=lambda f: f.__name__)
def test_a_dispatcher_rides_out_the_database_going_away(receiver, dispatchers, outage):
    receiver.respond = lambda _r: Reply(delay=0.02)
    ids = publish_fan_out(url=receiver.url, events=75, endpoints=2)
    db = connection.settings_dict
    with TcpProxy((db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))) as proxy:
        child = dispatchers.start(
            "--drain",
            "--concurrency=4",
            "--batch-size=10",
            "--worker-id=outage",
            database_url=dispatcher_database_url(host="127.0.0.1", port=proxy.port),
        )
        receiver.wait_for(30, timeout=30)
        outage(proxy)
        assert child.wait(60) == 0, child.stderr[-3000:]

    assert "database unavailable" in child.stderr
    assert unfinished() == 0
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert set(received_per_delivery(receiver)) == set(ids)
