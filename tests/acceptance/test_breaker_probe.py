"""Two dispatcher processes, one open breaker past its cooldown: one probe."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction

from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support.fakes import Received, Reply
from tests.support.processes import publish_fan_out, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]


def waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction pg_stat_activity is a snapshot: take a fresh one.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_two_dispatchers_send_exactly_one_probe_to_a_half_open_endpoint(
    receiver, dispatchers
):
    publish_fan_out(url=receiver.url, events=5, endpoints=1)
    now = utcnow()
    EndpointHealth.objects.update(
        breaker_state="open",
        consecutive_failures=10,
        cooldown_seconds=300,
        opened_at=now - timedelta(seconds=301),
        next_probe_at=now - timedelta(seconds=1),
    )
    # The probe is held in flight until the other dispatcher has claimed and
    # exited, so the two really overlap; it then fails, keeping the breaker
    # open (a success would close it and let the rest flow).
    loser_done = threading.Event()

    def hold_then_fail(_request: Received) -> Reply:
        loser_done.wait(20)
        return Reply(status=503)

    receiver.respond = hold_then_fail
    # The test holds the health row locked until both dispatchers have found
    # the probe due and wait on that lock: then they race for it for real.
    with transaction.atomic():
        EndpointHealth.objects.select_for_update().get()
        children = [
            # The test holds the lock longer than a dispatcher waits by default.
            dispatchers.start(
                "--once",
                f"--worker-id=probe-{n}",
                env={"DB_LOCK_TIMEOUT_SECONDS": "60"},
            )
            for n in range(2)
        ]
        wait_until(
            lambda: waiting_on_locks() == 2,
            timeout=60,  # two children starting on a loaded machine
            what="both dispatchers to wait for the health row",
        )
    wait_until(
        lambda: any(not c.running for c in children),
        timeout=15,
        what="one dispatcher to finish",
    )
    loser_done.set()
    for child in children:
        assert child.wait(30) == 0, child.stderr[-3000:]

    assert len(receiver.received) == 1
    summaries = sorted(c.stdout.split("stopped: ")[-1].split()[0] for c in children)
    assert summaries == ["claimed=0", "claimed=1"]
    health = EndpointHealth.objects.get()
    assert (health.breaker_state, health.cooldown_seconds) == ("open", 600)
