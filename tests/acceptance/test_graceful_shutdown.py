"""SIGTERM mid-batch: in-flight sends finish, the rest go back unspent, exit 0."""

from __future__ import annotations

import re
import signal
import time

import pytest

from deliveries.models import Attempt, Delivery
from tests.support.fakes import Reply
from tests.support.processes import publish_fan_out, received_per_delivery

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

SUMMARY = re.compile(
    r"stopped: claimed=(\d+) succeeded=(\d+) retried=0 dead=0 reclaimed=0$", re.M
)


def test_sigterm_mid_batch_exits_0_and_gives_unsent_rows_back_unspent(
    receiver, dispatchers
):
    receiver.respond = lambda _r: Reply(delay=0.5)
    ids = publish_fan_out(url=receiver.url, events=20, endpoints=1)
    child = dispatchers.start(
        "--concurrency=2", "--batch-size=20", "--worker-id=graceful"
    )
    receiver.wait_for(2, timeout=30)

    child.signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    assert child.wait(30) == 0, child.stderr[-3000:]
    # It waits for the two sends in flight (0.5 s) and gives the rest back;
    # that it did not send the rest is asserted below. The bound is loose
    # because a loaded 2-core machine was seen taking 5.8 s to exit.
    assert time.monotonic() - stopped_at < 15

    summary = SUMMARY.search(child.stdout)
    assert summary, child.stdout
    sent = set(received_per_delivery(receiver))
    assert summary.groups() == ("20", str(len(sent)))
    assert 2 <= len(sent) < len(ids)
    assert not Delivery.objects.filter(status="delivering").exists()
    assert set(
        Delivery.objects.filter(pk__in=sent).values_list("status", flat=True)
    ) == {"succeeded"}
    unsent = Delivery.objects.exclude(pk__in=sent)
    assert set(unsent.values_list("status", "attempt_count", "claimed_by")) == {
        ("pending", 0, "")
    }
    assert not Attempt.objects.filter(delivery__in=unsent).exists()
