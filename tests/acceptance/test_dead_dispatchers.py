"""Dead dispatchers are known within seconds, by their heartbeat: real processes.

A dispatcher killed with sends on the wire has its rows sent by another once
its heartbeat is DISPATCHER_DEAD_AFTER_SECONDS old, long before its lease
would end; one that was only frozen and comes back sends nothing it no
longer owns and records nothing over the new owner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import F
from django.db.models.functions import Now

from deliveries.dispatch.heartbeat import RETRY_SECONDS
from deliveries.models import Attempt, Delivery, DispatcherHeartbeat
from deliveries.ops import counters
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support.fakes import Received, Reply
from tests.support.processes import (
    dispatcher_database_url,
    publish_fan_out,
    unfinished,
    wait_until,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

DEAD_AFTER = "3"  # seconds: short, so the tests are quick
LEASE = 3600  # the backstop none of these tests may be waiting for
# Generous for a loaded machine, and still far inside the lease: a pass
# cannot be the lease running out.
WITHIN = 120
QUICK_DEATH = {"DISPATCHER_DEAD_AFTER_SECONDS": DEAD_AFTER}


@dataclass(frozen=True)
class Arrival:
    at: float  # monotonic
    delivery_id: str
    attempt: int


class FirstAttemptsHang:
    """Attempt 1 of each delivery hangs until released; later ones answer 200."""

    def __init__(self) -> None:
        self.arrivals: list[Arrival] = []
        self.released = threading.Event()
        self._lock = threading.Lock()

    def respond(self, request: Received) -> Reply:
        attempt = int(request.headers["X-Relay-Attempt"])
        with self._lock:
            self.arrivals.append(
                Arrival(
                    time.monotonic(), request.headers["X-Relay-Delivery-Id"], attempt
                )
            )
        if attempt == 1:
            self.released.wait(WITHIN + 60)
        return Reply()

    def count(self, *, attempt: int, after: float = 0.0) -> int:
        with self._lock:
            return sum(
                1 for a in self.arrivals if a.attempt == attempt and a.at > after
            )

    def per_delivery(self, *, attempt: int) -> Counter:
        with self._lock:
            return Counter(a.delivery_id for a in self.arrivals if a.attempt == attempt)


@pytest.fixture
def hanging(receiver):
    script = FirstAttemptsHang()
    receiver.respond = script.respond
    yield script
    script.released.set()  # let the receiver's threads end


def heartbeat_of(worker_id: str) -> DispatcherHeartbeat | None:
    return DispatcherHeartbeat.objects.filter(worker_id=worker_id).first()


def only_the_heir_succeeded(victim: str, heir: str) -> None:
    attempts = Counter(
        Attempt.objects.values_list("number", "worker_id", "error_kind", "status_code")
    )
    n = Delivery.objects.count()
    assert attempts == {(1, victim, "lease_expired", None): n, (2, heir, "", 200): n}


def test_a_killed_dispatcher_s_rows_are_sent_by_another_long_before_its_lease(
    receiver, hanging, dispatchers
):
    ids = publish_fan_out(url=receiver.url, events=6, endpoints=1)
    victim = dispatchers.start(
        "--concurrency=6",
        "--worker-id=victim",
        f"--lease-seconds={LEASE}",
        env={**QUICK_DEATH, "HTTP_TIMEOUT_SECONDS": str(WITHIN + 60)},
    )
    wait_until(
        lambda: hanging.count(attempt=1) == 6, timeout=60, what="six sends on the wire"
    )
    heir = dispatchers.start("--worker-id=heir", env=QUICK_DEATH)
    wait_until(lambda: heartbeat_of("heir"), timeout=60, what="the heir's first beat")

    victim.kill()
    # WITHIN is far inside the victim's lease: only its heartbeat can free them.
    wait_until(lambda: not unfinished(), timeout=WITHIN, what="the heir to send all")
    heir.signal(signal.SIGTERM)
    assert heir.wait(30) == 0, heir.stderr[-3000:]

    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert hanging.per_delivery(attempt=2) == Counter({i: 1 for i in ids})
    only_the_heir_succeeded("victim", "heir")
    totals = counters.counter_totals()
    assert totals[(counters.DISPATCHERS_DEAD, "")] == 1
    assert totals[(counters.DEAD_DISPATCHER_RELEASED, "")] == 6
    assert totals[(counters.RECLAIMED, "")] == 6
    assert "dispatcher victim declared dead" in heir.stderr


def test_a_frozen_dispatcher_taken_over_sends_and_records_nothing_after_it_thaws(
    receiver, hanging, dispatchers
):
    ids = publish_fan_out(url=receiver.url, events=10, endpoints=1)
    frozen = dispatchers.start(
        "--concurrency=2",
        "--batch-size=10",
        "--worker-id=frozen",
        f"--lease-seconds={LEASE}",
        env={**QUICK_DEATH, "HTTP_TIMEOUT_SECONDS": str(WITHIN + 60)},
    )
    # Two sends on the wire, eight queued behind them.
    wait_until(lambda: hanging.count(attempt=1) == 2, timeout=60, what="two sends")
    wait_until(
        lambda: Delivery.objects.filter(claimed_by="frozen").count() == 10,
        timeout=60,
        what="all ten claimed",
    )
    frozen.signal(signal.SIGSTOP)
    heir = dispatchers.start("--worker-id=heir", env=QUICK_DEATH)
    try:
        wait_until(lambda: not unfinished(), timeout=WITHIN, what="the heir's sends")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{heir.stderr[-3000:]}") from None

    frozen.signal(signal.SIGCONT)
    thawed_at = time.monotonic()
    # Its first beat after the thaw reads that it was declared dead.
    wait_until(
        lambda: DispatcherHeartbeat.objects.filter(
            worker_id="frozen", last_seen_at__gt=F("declared_dead_at")
        ).exists(),
        timeout=60,
        what="the thawed dispatcher's beat",
    )
    hanging.released.set()  # its two late sends now answer 200
    wait_until(
        lambda: frozen.stderr.count("fenced delivery=") == 2,
        timeout=60,
        what="its two late outcomes",
    )
    for child in (frozen, heir):
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0, child.stderr[-3000:]

    assert hanging.count(attempt=1, after=thawed_at) == 0, "it sent what it lost"
    assert hanging.count(attempt=1) == 2
    assert hanging.per_delivery(attempt=2) == Counter({i: 1 for i in ids})
    only_the_heir_succeeded("frozen", "heir")
    assert "declared dead and its deliveries released" in frozen.stderr


def test_a_dispatcher_whose_receivers_all_take_9_s_is_never_declared_dead(
    receiver, dispatchers
):
    receiver.respond = lambda _r: Reply(delay=9)
    ids = publish_fan_out(url=receiver.url, events=8, endpoints=2)
    # The busy one holds every send for 9 s; the other, idle, judges it.
    # A timeout well past 9 s: on a loaded machine a 9 s answer can take 10.
    slow = {**QUICK_DEATH, "HTTP_TIMEOUT_SECONDS": "30"}
    busy = dispatchers.start(
        "--concurrency=16", "--batch-size=16", "--worker-id=busy", env=slow
    )
    wait_until(
        lambda: Delivery.objects.filter(claimed_by="busy").count() == 16,
        timeout=60,
        what="every row claimed by the busy one",
    )
    judge = dispatchers.start("--worker-id=judge", env=slow)
    wait_until(lambda: not unfinished(), timeout=WITHIN, what="every slow send")
    for child in (busy, judge):
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0, child.stderr[-3000:]

    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    assert set(
        Attempt.objects.values_list("number", "worker_id", "error_kind", "status_code")
    ) == {(1, "busy", "", 200)}
    assert Counter(r.headers["X-Relay-Delivery-Id"] for r in receiver.received) == (
        Counter({i: 1 for i in ids})
    )
    assert counters.counter_totals().get((counters.DISPATCHERS_DEAD, ""), 0) == 0
    assert "declared dead" not in judge.stderr


def restart_through_proxy(proxy: TcpProxy, children) -> None:
    proxy.cut()
    # Down until every heartbeat is older than the dead threshold, as seen
    # from this side of the proxy: back up, a careless judge would kill all.
    wait_until(
        lambda: (
            not DispatcherHeartbeat.objects.filter(
                last_seen_at__gt=Now() - timedelta(seconds=float(DEAD_AFTER) + 1)
            ).exists()
        ),
        timeout=60,
        what="every heartbeat to go stale",
    )
    proxy.resume()


def restart_server(_proxy: TcpProxy, children) -> None:
    (version,) = [p.name for p in Path("/etc/postgresql").iterdir()]
    cluster = ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]
    subprocess.run([*cluster, "stop"], check=True, timeout=120)
    connection.close()  # the test's own session died with the server
    # Down until each child has failed enough beats that its row is stale.
    missed = int(float(DEAD_AFTER) / RETRY_SECONDS) + 2
    wait_until(
        lambda: all(c.stderr.count("heartbeat failed") >= missed for c in children),
        timeout=60,
        what="the heartbeats to fail past the dead threshold",
    )
    subprocess.run([*cluster, "start"], check=True, timeout=120)


OUTAGES = [restart_through_proxy]
if os.environ.get("RELAY_TEST_RESTART_POSTGRES") == "1":
    OUTAGES.append(restart_server)


@pytest.mark.parametrize("outage", OUTAGES, ids=lambda f: f.__name__)
def test_a_database_restart_longer_than_the_threshold_kills_no_dispatcher(
    receiver, dispatchers, outage
):
    receiver.respond = lambda _r: Reply(delay=0.05)
    publish_fan_out(url=receiver.url, events=100, endpoints=2)
    db = connection.settings_dict
    with TcpProxy((db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))) as proxy:
        url = dispatcher_database_url(host="127.0.0.1", port=proxy.port)
        children = [
            dispatchers.start(
                "--concurrency=2",
                "--batch-size=5",
                f"--worker-id=rider-{n}",
                database_url=url,
                env=QUICK_DEATH,
            )
            for n in range(2)
        ]
        receiver.wait_for(20, timeout=60)
        outage(proxy, children)
        with connection.cursor() as cursor:
            cursor.execute("SELECT now()")
            (resumed,) = cursor.fetchone()
        # Both beaten steadily past the threshold since: each has judged the
        # other at least once (heartbeat.py judges after a steady run).
        steady = resumed + timedelta(seconds=3 * float(DEAD_AFTER))
        wait_until(
            lambda: (
                DispatcherHeartbeat.objects.filter(last_seen_at__gt=steady).count() == 2
            ),
            timeout=WITHIN,
            what="both to beat steadily after the restart\n"
            + "\n".join(c.stderr[-2000:] for c in children),
        )
        wait_until(lambda: not unfinished(), timeout=WITHIN, what="every delivery")
        assert DispatcherHeartbeat.objects.filter(deaths__gt=0).count() == 0
        for child in children:
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0, child.stderr[-3000:]

    assert "database unavailable" in children[0].stderr
    totals = counters.counter_totals()
    assert (
        totals.get((counters.DISPATCHERS_DEAD, ""), 0)
        == totals.get((counters.DEAD_DISPATCHER_RELEASED, ""), 0)
        == 0
    )
    # (A claim whose commit was answered into the cut is still resent after
    # its lease, as lease_expired: that is the lease's job, not a death.)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
