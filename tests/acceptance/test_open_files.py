"""A dispatcher started under a low limit on open files still opens a socket
for every send slot: a shortage of its own must not be recorded as the
receivers' connection errors (and move their breakers)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from deliveries.models import Attempt, Delivery
from tests.support.fakes import Reply
from tests.support.processes import ROOT, child_env, publish_fan_out

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

SLOTS = 60
# Below what the process holds before its first send (interpreter, database
# sessions, pipes) plus SLOTS sockets: without the raise, a part of the sends
# cannot open a socket.
SOFT_LIMIT = 40


def _low_soft_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, hard))


def test_every_send_slot_gets_a_socket_under_a_low_soft_limit(receiver, tmp_path):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * SLOTS + 64:
        pytest.fail(f"the hard limit ({hard}) leaves no room to test the raise")
    # Every request is held a while, so all SLOTS are open at the same time.
    receiver.respond = lambda _request: Reply(delay=1.5)
    publish_fan_out(url=receiver.url, events=1, endpoints=SLOTS)

    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        child = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "run_dispatcher",
                "--drain",
                f"--concurrency={SLOTS}",
                "--worker-id=few-files",
            ],
            cwd=ROOT,
            env=child_env(),
            stdout=out,
            stderr=err,
            preexec_fn=_low_soft_limit,
        )
        try:
            assert child.wait(60) == 0, (tmp_path / "err").read_text()[-3000:]
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()

    errors = list(
        Attempt.objects.exclude(status_code=200).values_list(
            "error_kind", "error_message"
        )
    )
    assert errors == []
    assert Delivery.objects.filter(status=Delivery.Status.SUCCEEDED).count() == SLOTS
    assert len(receiver.received) == SLOTS
