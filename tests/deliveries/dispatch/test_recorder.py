"""The recorder: one outcome the database refuses cannot sink its flush, nor
poison its row; and its timing is the injected clock's."""

from __future__ import annotations

import random
import threading

import pytest

from deliveries.dispatch import claiming, gate, outcomes, recorder
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.jobs import jobs_load
from deliveries.dispatch.sendloop import Finished
from deliveries.dispatch.transport import SendResult
from deliveries.models import Attempt, Delivery
from deliveries.ops import counters
from deliveries.services import event_publish
from tests.support import factories
from tests.support.fakes import FakeClock, ScriptedSender

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]

LEASE = 30


def claimed_flush(clock: FakeClock, results: list[SendResult]) -> list[outcomes.Sent]:
    """One delivery per result, to endpoints of their own, claimed by "w"."""
    merchant = factories.merchant()
    for _ in results:
        factories.endpoint(merchant)
    event_publish(merchant=merchant, type="a", data={}, now=clock.now())
    claim = claiming.claim_batch(
        worker_id="w", now=clock.now(), lease_seconds=LEASE, limit=len(results)
    )
    rows = Delivery.objects.filter(pk__in=claim.delivery_ids).order_by("endpoint_id")
    return [
        outcomes.Sent(
            delivery_id=row.pk,
            endpoint_id=row.endpoint_id,
            lease_until=claim.lease_until,
            attempt_count=row.attempt_count,
            budget_start=row.budget_start,
            max_attempts=10,
            is_probe=False,
            started_at=clock.now(),
            result=result,
        )
        for row, result in zip(rows, results, strict=True)
    ]


def record(clock: FakeClock, sent: list[outcomes.Sent]) -> outcomes.Recorded:
    return recorder.flush_record(
        sent=sent, worker_id="w", now=clock.now(), rand=random.Random(1)
    )


HEALTHY = SendResult(status_code=200, duration_ms=3.0, body_excerpt="fine")
# A status no column can hold: what "the database refuses this outcome" looks like.
UNSTORABLE = SendResult(status_code=2**70, duration_ms=3.0, body_excerpt="x")


def test_text_a_receiver_shaped_is_stored_without_nul_or_lone_surrogates():
    clock = FakeClock()
    hostile = SendResult(
        status_code=500,
        duration_ms=3.0,
        body_excerpt="before\x00after \udcff\ud800 end",
        error_message="bad \x00 message",
    )
    sent = claimed_flush(clock, [hostile])

    record(clock, sent)

    attempt = Attempt.objects.get()
    assert attempt.response_body == "before\ufffdafter \ufffd\ufffd end"
    assert attempt.error_message == "bad \ufffd message"
    assert (attempt.status_code, attempt.error_kind) == (500, "http_status")


def test_one_refused_outcome_leaves_the_others_recorded_and_is_an_error_attempt():
    clock = FakeClock()
    sent = claimed_flush(clock, [HEALTHY, UNSTORABLE, HEALTHY])

    recorded = record(clock, sent)

    statuses = dict(Delivery.objects.values_list("pk", "status"))
    assert [statuses[s.delivery_id] for s in sent] == [
        "succeeded",
        "pending",
        "succeeded",
    ]
    refused = Attempt.objects.get(delivery_id=sent[1].delivery_id)
    assert (refused.status_code, refused.error_kind) == (None, "invalid_response")
    assert "could not be stored" in refused.error_message
    assert Delivery.objects.get(pk=sent[1].delivery_id).attempt_count == 1
    assert recorded.tally[(counters.ATTEMPTS, "succeeded")] == 2
    assert not Delivery.objects.filter(status="delivering").exists()


def test_if_text_slips_past_the_sanitiser_the_status_still_stands(monkeypatch):
    # The second line of defence: with sanitising switched off, a lone surrogate
    # reaches the database driver, which refuses it; the 200 is kept anyway.
    monkeypatch.setattr(outcomes, "storable_text", lambda v, limit=None: v or "")
    clock = FakeClock()
    surrogate = SendResult(status_code=200, duration_ms=3.0, body_excerpt="\ud800")
    sent = claimed_flush(clock, [surrogate, HEALTHY])

    record(clock, sent)

    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    kept = Attempt.objects.get(delivery_id=sent[0].delivery_id)
    assert (kept.status_code, kept.response_body) == (200, "")


def test_an_outcome_nothing_can_store_is_released_without_spending_an_attempt():
    clock = FakeClock()
    healthy, broken = claimed_flush(clock, [HEALTHY, HEALTHY])
    # started_at is ours, not the receiver's: no plainer result can fix it.
    broken = outcomes.Sent(**{**broken.__dict__, "started_at": None})

    record(clock, [healthy, broken])

    assert Delivery.objects.get(pk=healthy.delivery_id).status == "succeeded"
    released = Delivery.objects.get(pk=broken.delivery_id)
    assert (released.status, released.attempt_count, released.claimed_by) == (
        "pending",
        0,
        "",
    )
    assert released.next_attempt_at > clock.now()
    assert not Attempt.objects.filter(delivery_id=broken.delivery_id).exists()


# -- its timing is the injected clock's -------------------------------------


class HourPerLook(FakeClock):
    """Each monotonic reading an hour past the last (wall time unmoved, so
    leases hold): every deadline kept on this clock is due at the next look,
    while on time.monotonic() an hour-long one would keep a test waiting."""

    def __init__(self) -> None:
        super().__init__()
        self._looks = 0
        self._looks_lock = threading.Lock()

    def monotonic(self) -> float:
        with self._looks_lock:
            self._looks += 1
            return super().monotonic() + 3600 * self._looks


def a_recorder(clock: FakeClock) -> recorder.Recorder:
    return recorder.Recorder(
        worker_id="w",
        clock=clock,
        rand=random.Random(1),
        lease_seconds=LEASE,
        watch=gate.BreakerWatch(monotonic=clock.monotonic),
        stats=recorder.Stats(),
    )


def finished_jobs(clock: FakeClock, count: int) -> list[Finished]:
    endpoint = factories.endpoint()
    for n in range(count):
        event_publish(
            merchant=endpoint.merchant, type="a", data={"n": n}, now=clock.now()
        )
    claim = claiming.claim_batch(
        worker_id="w", now=clock.now(), lease_seconds=LEASE, limit=count
    )
    jobs = jobs_load(
        delivery_ids=claim.delivery_ids,
        lease_until=claim.lease_until,
        probe_ids=set(),
        now=clock.now(),
    )
    return [Finished(job=job, result=HEALTHY, started_at=clock.now()) for job in jobs]


def test_outcomes_wait_out_the_record_window_on_the_injected_clock(monkeypatch):
    monkeypatch.setattr(recorder, "RECORD_EVERY_SECONDS", 3600)
    clock = FakeClock()
    rec = a_recorder(clock)
    (done,) = finished_jobs(clock, 1)
    rec.handed([done.job])
    rec.take(done)

    assert rec.flush(force=False, stopping=False).recorded is False
    assert rec.record_in() == pytest.approx(3600, abs=5)
    assert Delivery.objects.get().status == Delivery.Status.DELIVERING

    clock.advance(3601)
    assert rec.record_in() == 0
    flushed = rec.flush(force=False, stopping=False)
    assert flushed.recorded is True
    assert flushed.failures == {}
    assert Delivery.objects.get().status == Delivery.Status.SUCCEEDED
    assert rec.idle and rec.stats.succeeded == 1


def test_the_dispatcher_records_and_claims_on_its_clock_not_time_monotonic(
    monkeypatch,
):
    # An hour-long record window and poll interval: a dispatcher timing either
    # on time.monotonic() would sit on its outcomes and never finish the drain.
    monkeypatch.setattr(recorder, "RECORD_EVERY_SECONDS", 3600)
    clock = HourPerLook()
    endpoint = factories.endpoint()
    for n in range(3):
        event_publish(
            merchant=endpoint.merchant, type="a", data={"n": n}, now=clock.now()
        )
    dispatcher = Dispatcher(
        worker_id="w",
        sender=ScriptedSender(),
        batch_size=10,
        concurrency=2,
        lease_seconds=LEASE,
        poll_interval=3600,
        clock=clock,
        rand=random.Random(1),
    )
    runs = threading.Thread(target=dispatcher.run, kwargs={"drain": True})
    runs.start()
    runs.join(timeout=30)
    finished_in_time = not runs.is_alive()
    if not finished_in_time:
        dispatcher.stop()
        runs.join(timeout=30)
    assert finished_in_time, "the dispatcher waited on a clock it was not given"
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
