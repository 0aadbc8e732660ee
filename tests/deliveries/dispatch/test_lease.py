"""The default lease stays bounded, and a job that could outlive its lease is
given back unspent instead of being sent."""

from __future__ import annotations

import pytest

from deliveries.dispatch.lease import default_lease_seconds, start_margin
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from tests.deliveries.dispatch.test_dispatcher import make_dispatcher
from tests.support import factories
from tests.support.fakes import ScriptedSender


@pytest.mark.parametrize(
    ("batch", "concurrency", "timeout", "lease"),
    [
        (200, 512, 10, 80),  # the defaults: one wave, its own send, a minute
        (50, 256, 10, 80),  # the defaults before issue 21: the same
        (600, 512, 10, 90),  # a batch over the slots: two waves before its own
        (50, 1, 10, 570),  # 51 waves: 570 s, under the cap
        (10_000, 1, 10, 600),  # capped: no setting makes days of it
        (50, 256, 300, 660),  # a long timeout: two sends and a minute
    ],
)
def test_the_default_lease(batch, concurrency, timeout, lease):
    assert (
        default_lease_seconds(
            batch_size=batch, concurrency=concurrency, timeout=timeout
        )
        == lease
    )


@pytest.mark.parametrize(
    ("lease", "margin"), [(80, 12), (24, 12), (23, None), (2, None), (600, 12)]
)
def test_a_lease_too_short_for_two_sends_keeps_sending_what_it_holds(lease, margin):
    assert start_margin(lease_seconds=lease, timeout=10, grace=2) == margin


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_backends
def test_a_job_whose_lease_could_end_mid_send_goes_back_unspent():
    endpoint = factories.endpoint()
    for n in range(3):
        event_publish(merchant=endpoint.merchant, type="a", data={"n": n})
    sender = ScriptedSender()
    # 30 s of lease left at claim time, and a send may take 12: sendable; with
    # 40 needed (say, it waited in the queue), not.
    worker = make_dispatcher(sender=sender, lease_seconds=30, start_margin=40)

    assert worker.run_once() == 3
    worker.close()

    assert sender.requests == []
    assert set(
        Delivery.objects.values_list("status", "attempt_count", "claimed_by")
    ) == {("pending", 0, "")}
    assert not Attempt.objects.exists()
