"""Pull endpoints end to end, all real processes: a gunicorn web server, two
dispatchers (they send the merchant's HTTP deliveries, pass the pull
endpoint's by, and notice its expired leases), and consumer processes
(tests/support/pull_consumer.py) that pull over HTTP and ack.

What each consumer did is read back from its JSON lines; a lease's span is
exact in the server's own time: it starts at lease_expires_at less the
endpoint's visibility timeout."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.pull.leasing import PULLED_BY
from deliveries.services import EventInput, events_publish
from endpoints import brokers
from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint, Merchant
from endpoints.services import endpoint_create
from relayproject.lib.clock import utcnow
from tests.acceptance.test_web_processes import Web
from tests.support import factories
from tests.support.processes import ROOT, child_env, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

VISIBILITY = 2  # seconds: short, so a lost lease comes back within the test
KILLED_VISIBILITY = 4
CONSUMER = ROOT / "tests" / "support" / "pull_consumer.py"
WAIT = 45.0  # seconds the whole run may take before the test fails


@dataclass(frozen=True)
class Lease:
    consumer: str
    id: str
    attempt: int
    start: datetime
    expires: datetime
    data: dict


class Consumer:
    """One pull_consumer.py process; its lines read back from its --out file."""

    def __init__(
        self, name: str, *, url: str, key: str, visibility: int, logs: Path, args=()
    ) -> None:
        self.name = name
        self.visibility = timedelta(seconds=visibility)
        self.out = logs / f"{name}.jsonl"
        self.out.touch()
        self._stderr = (logs / f"{name}.err").open("wb")
        self.popen = subprocess.Popen(
            [
                sys.executable,
                str(CONSUMER),
                f"--url={url}",
                f"--key={key}",
                f"--out={self.out}",
                *args,
            ],
            cwd=ROOT,
            env=child_env(),
            stdout=self._stderr,
            stderr=self._stderr,
        )

    def records(self) -> list[dict]:
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def leases(self) -> list[Lease]:
        leases = []
        for r in self.records():
            if "leased" in r:
                expires = datetime.fromisoformat(r["lease_expires_at"])
                start = expires - self.visibility
                leases.append(
                    Lease(
                        self.name, r["leased"], r["attempt"], start, expires, r["data"]
                    )
                )
        return leases

    def answered(self, kind: str) -> list[str]:
        return [pk for r in self.records() for pk in r.get(kind, [])]

    def stalled(self) -> bool:
        return any(r.get("stalled") for r in self.records())

    def kill(self) -> None:
        self.popen.kill()
        self.popen.wait()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._stderr.close()


@pytest.fixture
def web(transactional_db, tmp_path):
    server = Web(tmp_path, workers=4)
    try:
        wait_until(server.up, timeout=60, what="gunicorn to answer /healthz")
        yield server
    finally:
        server.close()


@pytest.fixture
def consumers(web, tmp_path):
    """Start consumers of a pull endpoint: start(name, endpoint, *args)."""
    started: list[Consumer] = []

    def start(name: str, endpoint: Endpoint, *args: str) -> Consumer:
        _, key = apikey_create(name=f"consumer {name}", merchant=endpoint.merchant)
        path = f"/api/v1/merchants/{endpoint.merchant.slug}/endpoints/{endpoint.pk}"
        consumer = Consumer(
            name,
            url=web.url(path + "/messages"),
            key=key,
            visibility=endpoint.visibility_timeout_seconds,
            logs=tmp_path,
            args=args,
        )
        started.append(consumer)
        return consumer

    yield start
    for consumer in started:
        consumer.stop()


def pull_endpoint(
    merchant: Merchant, *, visibility: int = VISIBILITY, **kwargs
) -> Endpoint:
    endpoint = endpoint_create(
        merchant=merchant, url="", kind=brokers.PULL, now=utcnow(), **kwargs
    )
    Endpoint.objects.filter(pk=endpoint.pk).update(
        visibility_timeout_seconds=visibility
    )
    return Endpoint.objects.select_related("merchant").get(pk=endpoint.pk)


def all_succeeded(endpoint: Endpoint, count: int):
    return lambda: (
        Delivery.objects.filter(endpoint=endpoint, status="succeeded").count() == count
    )


def leases_by_message(*consumers: Consumer) -> dict[str, list[Lease]]:
    by_id: dict[str, list[Lease]] = defaultdict(list)
    for consumer in consumers:
        for lease in consumer.leases():
            by_id[lease.id].append(lease)
    return {pk: sorted(leases, key=lambda x: x.start) for pk, leases in by_id.items()}


def overlapping(leases: dict[str, list[Lease]]) -> list[tuple[Lease, Lease]]:
    """Pairs of leases of one message where the later began before the
    earlier ran out (these consumers never nack, so only expiry ends one)."""
    return [
        (earlier, later)
        for held in leases.values()
        for earlier, later in zip(held, held[1:], strict=False)
        if later.start < earlier.expires
    ]


def attempts_of(endpoint: Endpoint) -> dict[str, list[tuple]]:
    found = defaultdict(list)
    for row in Attempt.objects.filter(endpoint=endpoint).order_by("number"):
        found[row.delivery_id].append((row.number, row.outcome, row.error_kind))
    return found


def test_a_thousand_events_are_acked_once_each_by_two_consumers(
    dispatchers, consumers, receiver
):
    merchant = factories.merchant()
    pull = pull_endpoint(merchant)
    http = factories.endpoint(merchant, url=receiver.url + "/hook")
    for name in ("a", "b"):
        dispatchers.start(f"--worker-id=pull-{name}", "--batch-size=50")
    # Each leaves every 40th first lease to run out: it comes back after the
    # visibility timeout, to whichever consumer pulls first.
    a = consumers("a", pull, "--limit=50", "--drop-every=40")
    b = consumers("b", pull, "--limit=50", "--drop-every=40")
    events_publish(
        merchant=merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(1000)],
    )

    wait_until(all_succeeded(pull, 1000), timeout=WAIT, what="1,000 acks")
    wait_until(all_succeeded(http, 1000), timeout=WAIT, what="1,000 HTTP sends")

    ids = set(Delivery.objects.filter(endpoint=pull).values_list("pk", flat=True))
    acked = Counter(a.answered("acked") + b.answered("acked"))
    assert set(acked) == ids
    assert set(acked.values()) == {1}  # each acked exactly once
    assert a.answered("acked") and b.answered("acked")  # both took part
    leases = leases_by_message(a, b)
    assert overlapping(leases) == []
    dropped = {r["dropped"] for c in (a, b) for r in c.records() if "dropped" in r}
    assert len(dropped) >= 20
    # An ack that came after its lease (a slow machine) is refused: that
    # message came back too, as a dropped one does.
    dropped |= set(a.answered("rejected") + b.answered("rejected"))
    attempts = attempts_of(pull)
    for pk in dropped:
        # Handed out again only after its lease ran out, as its next attempt.
        assert [x.attempt for x in leases[pk]] == [1, 2]
        assert attempts[pk] == [
            (1, "retry", ErrorKind.LEASE_EXPIRED),
            (2, "succeeded", ""),
        ]
    assert {pk: len(a) for pk, a in attempts.items() if pk not in dropped} == {
        pk: 1 for pk in ids - dropped
    }
    # No dispatcher ever sent a pulled message; the HTTP ones went once each.
    assert set(
        Attempt.objects.filter(endpoint=pull).values_list("worker_id", flat=True)
    ) == {PULLED_BY}
    assert len(receiver.received) == 1000
    assert not Delivery.objects.exclude(status="succeeded").exists()


def test_a_killed_consumers_messages_come_back_only_after_their_lease(
    dispatchers, consumers
):
    merchant = factories.merchant()
    # Long enough for b to pull, ack and stop while a's leases still live.
    pull = pull_endpoint(merchant, visibility=KILLED_VISIBILITY)
    dispatchers.start("--worker-id=pull-upkeep")
    events_publish(
        merchant=merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(20)],
    )
    # a pulls ten, acks three one by one, and stops holding the other seven.
    a = consumers("a", pull, "--limit=10", "--answer-each", "--stall-after=3")
    wait_until(a.stalled, timeout=WAIT, what="consumer a to stall mid-batch")
    b = consumers("b", pull, "--limit=100")
    wait_until(
        lambda: len(b.answered("acked")) == 10,
        timeout=WAIT,
        what="b to ack the ten a does not hold",
    )
    b.stop()
    a.kill()
    held = {x.id for x in a.leases()} - set(a.answered("acked"))
    assert len(held) == 7
    assert held.isdisjoint(x.id for x in b.leases())

    # No consumer runs now: only the dispatchers notice the leases ran out.
    wait_until(
        lambda: (
            Delivery.objects.filter(
                pk__in=held, status="pending", last_error=ErrorKind.LEASE_EXPIRED
            ).count()
            == 7
        ),
        timeout=WAIT,
        what="the dispatchers to spend the expired leases",
    )
    c = consumers("c", pull, "--limit=100")
    wait_until(all_succeeded(pull, 20), timeout=WAIT, what="20 acks")

    a_expiry = {x.id: x.expires for x in a.leases()}
    c_leases = {x.id: x for x in c.leases()}
    assert {pk: c_leases[pk].attempt for pk in held} == {pk: 2 for pk in held}
    assert all(c_leases[pk].start >= a_expiry[pk] for pk in held)
    attempts = attempts_of(pull)
    assert {pk: attempts[pk] for pk in held} == {
        pk: [(1, "retry", ErrorKind.LEASE_EXPIRED), (2, "succeeded", "")] for pk in held
    }
    acked = a.answered("acked") + b.answered("acked") + c.answered("acked")
    assert Counter(acked) == Counter(
        Delivery.objects.filter(endpoint=pull).values_list("pk", flat=True)
    )
