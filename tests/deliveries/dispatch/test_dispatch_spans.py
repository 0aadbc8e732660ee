"""A dispatcher in this process, the SDK in memory: claim, send and record spans,
retries linked to the same publish, breaker moves as span events."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models.functions import Now
from prometheus_client.parser import text_string_to_metric_families

from deliveries.models import Delivery, Event
from deliveries.ops.metrics import metrics_text
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support.api import api_as
from tests.support.fakes import Reply

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

MARKER = "payload-marker-5d1a"


def _publish(receiver_url: str) -> tuple[str, str]:
    api = api_as(None)
    assert api.post("/merchants", {"slug": "acme", "name": "Acme"}).status_code == 201
    made = api.post("/merchants/acme/endpoints", {"url": receiver_url}).json()
    response = api.post(
        "/events", {"merchant": "acme", "type": "order.paid", "data": {"m": MARKER}}
    )
    assert response.status_code == 201, response.content
    return response.json()["id"], made["secret"]


def _drain() -> None:
    call_command("run_dispatcher", "--drain", stdout=StringIO())


def _due_now() -> None:
    Delivery.objects.update(next_attempt_at=Now())


def test_every_attempt_of_a_delivery_links_to_its_one_publish(
    on_postgres, receiver, spans
):
    replies = iter([Reply(status=500), Reply(status=200)])
    receiver.respond = lambda _r: next(replies)
    event_id, secret = _publish(receiver.url)
    publish = spans.one("relay.publish")

    _drain()
    _due_now()
    _drain()

    first, second = sorted(
        spans.named("POST"), key=lambda s: s.attributes["relay.attempt"]
    )
    for send in (first, second):
        assert [link.context.span_id for link in send.links] == [
            publish.context.span_id
        ]
        assert send.links[0].context.trace_id == publish.context.trace_id
        assert send.attributes["relay.event_id"] == event_id
        # Not a child of anything: the publish ended long before.
        assert send.parent is None
    assert (first.attributes["relay.outcome"], second.attributes["relay.outcome"]) == (
        "retry",
        "succeeded",
    )
    assert first.attributes["error.type"] == "500"
    assert sum(c.attributes["relay.claimed"] for c in spans.named("relay.claim")) == 2
    assert sum(r.attributes["relay.outcomes"] for r in spans.named("relay.record")) == 2
    text = spans.text()
    assert MARKER not in text and secret.removeprefix("whsec_") not in text
    assert Event.objects.get(pk=event_id).deliveries.get().status == "succeeded"
    # The waits from publish, as /metrics histograms: one first attempt, one success.
    counts = {
        sample.name: sample.value
        for family in text_string_to_metric_families(
            metrics_text(now=utcnow()).decode()
        )
        for sample in family.samples
        if sample.name.endswith("_count")
    }
    assert counts["relay_publish_to_first_attempt_seconds_count"] == 1
    assert counts["relay_publish_to_success_seconds_count"] == 1
    assert counts["relay_attempt_duration_seconds_count"] == 2


def test_the_breaker_opening_and_closing_are_events_on_the_record_span(
    on_postgres, receiver, spans, settings
):
    settings.BREAKER_FAILURE_THRESHOLD = 1
    replies = iter([Reply(status=503), Reply(status=200)])
    receiver.respond = lambda _r: next(replies)
    _publish(receiver.url)

    _drain()
    health = EndpointHealth.objects.get()
    assert health.breaker_state == "open"
    # The cooldown over: the next claim takes the delivery as the probe.
    EndpointHealth.objects.update(next_probe_at=Now() - timedelta(seconds=1))
    _due_now()
    _drain()

    events = [
        (event.name, dict(event.attributes))
        for record in spans.named("relay.record")
        for event in record.events
    ]
    assert [name for name, _ in events] == ["breaker.opened", "breaker.closed"]
    assert events[0][1]["relay.endpoint_id"] == health.pk
    assert "503" in events[0][1]["relay.breaker_reason"]
    probe = [s for s in spans.named("POST") if s.attributes["relay.probe"]]
    assert len(probe) == 1 and probe[0].attributes["relay.outcome"] == "succeeded"


def test_a_traceparent_header_goes_to_receivers_only_when_asked(
    on_postgres, receiver, spans, settings
):
    _publish(receiver.url)
    _drain()
    assert "traceparent" not in {k.lower() for k in receiver.received[0].headers}

    settings.RELAY_SEND_TRACEPARENT = True
    Delivery.objects.update(status="pending", next_attempt_at=Now())
    _drain()

    header = {k.lower(): v for k, v in receiver.received[1].headers.items()}
    send = max(spans.named("POST"), key=lambda s: s.start_time)
    assert header["traceparent"] == (
        f"00-{send.context.trace_id:032x}-{send.context.span_id:016x}-01"
    )
