"""PostgreSQL crashes (an immediate stop) right after commits, and no event or
delivery is lost: a publish acknowledged with 201 is on disk, and a record
committed lazily (synchronous_commit off, deliveries/dispatch/outcomes.py)
that the crash takes away costs one resend after its lease, nothing more.

On a server of the test's own (tests/support/pgserver.py), so it runs on any
machine without touching the shared one: real gunicorn, real dispatcher, real
receiver, all pointed at it.
"""

from __future__ import annotations

import signal

import pytest
import requests

from endpoints.apikeys import apikey_create
from tests.acceptance.test_web_processes import Web
from tests.support import factories
from tests.support.pgserver import PrivateServer
from tests.support.processes import dispatcher_database_url, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

EVENTS = 20  # per round
ROUNDS = 3  # a round's crash can miss the lazy commits; see below
LEASE = 5.0


@pytest.fixture
def server():
    own = PrivateServer()
    try:
        yield own
    finally:
        own.close()


def publish(web: Web, key: str, slug: str, n: int) -> None:
    """One POST per event, each answered 201 before the next is sent."""
    for i in range(n):
        answer = requests.post(
            web.url("/api/v1/events"),
            json={"merchant": slug, "type": "order.paid", "data": {"i": i}},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text


def statuses(server: PrivateServer) -> dict[str, str]:
    return dict(server.query("SELECT id, status FROM deliveries_delivery"))


def test_a_server_crash_after_commits_loses_no_event_and_no_delivery(
    transactional_db, dispatchers, receiver, server, tmp_path
):
    merchant = factories.merchant("crash")
    factories.endpoint(merchant, url=receiver.url)
    _, key = apikey_create(name="crash", merchant=merchant)
    server.copy_database(dispatcher_database_url())
    web = Web(tmp_path, workers=1, database_url=server.url())
    try:
        wait_until(web.up, timeout=60, what="gunicorn to answer /healthz")

        # 1. Publishes are durable: every 201 survives a crash right after it
        # (nothing else commits in between: no dispatcher runs yet).
        publish(web, key, merchant.slug, EVENTS)
        server.crash()
        server.start()
        assert server.query("SELECT count(*) FROM deliveries_event") == [(EVENTS,)]
        assert len(statuses(server)) == EVENTS

        # 2. Records: crash right after the last flush of successes commits.
        child = dispatchers.start(
            "--concurrency=4",
            "--batch-size=10",
            f"--lease-seconds={LEASE}",
            "--worker-id=crash",
            database_url=server.url(),
            env={"HTTP_TIMEOUT_SECONDS": "1"},
        )
        published, lost = EVENTS, set()
        for _round in range(ROUNDS):
            if _round:
                publish(web, key, merchant.slug, EVENTS)
                published += EVENTS
            wait_until(
                lambda n=published: (
                    list(statuses(server).values()).count("succeeded") == n
                ),
                timeout=60,
                what="every delivery recorded",
            )
            # Frozen, the dispatcher commits nothing durable (a heartbeat, a
            # claim) that would write the lazy records out before the crash.
            child.signal(signal.SIGSTOP)
            server.crash()
            server.start()
            child.signal(signal.SIGCONT)
            # Every record the crash took is a row left delivering.
            lost |= {d for d, s in statuses(server).items() if s == "delivering"}
            wait_until(
                lambda: set(statuses(server).values()) == {"succeeded"},
                timeout=30 + LEASE,
                what="every delivery to end succeeded\n" + child.stderr[-3000:],
            )
            if lost:
                break
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0, child.stderr[-3000:]
    finally:
        web.close()

    # The WAL writer may have written a round's records before its crash
    # (it wakes every 10 s): then the next round tries again.
    assert lost, f"no round's crash took a record in {ROUNDS} rounds"
    assert len(statuses(server)) == published
    received = [r.headers["X-Relay-Delivery-Id"] for r in receiver.received]
    assert set(received) == set(statuses(server))  # every one at least once
    # A lost record costs its delivery one more send, after its lease (a
    # loaded machine may let another lease run out too: that is allowed).
    assert all(received.count(d) >= 2 for d in lost), lost
    again = server.query(
        "SELECT delivery_id FROM deliveries_attempt WHERE error_kind = 'lease_expired'"
    )
    assert lost <= {d for (d,) in again}
