"""Spans on the publishing side: the API, the in-process service, replay, recover."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry import trace

from deliveries.models import Delivery, Event
from deliveries.replay import deliveries_recover, delivery_replay
from deliveries.services import event_publish
from relayproject.lib import tracing
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import api_as

pytestmark = pytest.mark.django_db

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"
MARKER = "payload-marker-7f3c"


def _ids(traceparent: str) -> tuple[str, str]:
    _, trace_id, span_id, _ = traceparent.split("-")
    return trace_id, span_id


def test_an_api_publish_joins_the_callers_trace_and_is_stored_on_the_event(spans):
    merchant = factories.merchant("acme")
    factories.endpoint(merchant)
    api = api_as(None)

    response = api.post(
        "/events",
        {"merchant": "acme", "type": "order.created", "data": {"secret": MARKER}},
        headers={"traceparent": CALLER},
    )

    assert response.status_code == 201, response.content
    publish = spans.one("relay.publish")
    assert format(publish.context.trace_id, "032x") == CALLER_TRACE
    event = Event.objects.get(pk=response.json()["id"])
    assert _ids(event.traceparent) == (
        CALLER_TRACE,
        format(publish.context.span_id, "016x"),
    )
    assert publish.attributes["relay.event_id"] == event.pk
    assert publish.attributes["relay.merchant_id"] == merchant.pk
    assert publish.attributes["relay.delivery_count"] == 1
    server = [s for s in spans.all() if s.kind == trace.SpanKind.SERVER]
    assert server and publish.parent.span_id == server[0].context.span_id
    assert MARKER not in spans.text()


def test_a_batch_is_one_publish_span_and_every_event_links_to_it(spans):
    factories.endpoint(factories.merchant("acme"))
    response = api_as(None).post(
        "/events/batch",
        {"events": [{"merchant": "acme", "type": "a.b", "data": {}}] * 3},
    )

    assert response.status_code == 201, response.content
    publish = spans.one("relay.publish")
    assert publish.attributes["relay.event_count"] == 3
    stored = set(Event.objects.values_list("traceparent", flat=True))
    assert len(stored) == 1
    assert _ids(stored.pop())[1] == format(publish.context.span_id, "016x")


def test_in_process_publish_is_a_child_of_the_callers_span(spans):
    merchant = factories.merchant("acme")
    with tracing.tracer.start_as_current_span("checkout") as outer:
        event = event_publish(merchant=merchant, type="order.paid", data={})

    publish = spans.one("relay.publish")
    assert publish.parent.span_id == outer.get_span_context().span_id
    assert _ids(event.traceparent)[0] == format(
        outer.get_span_context().trace_id, "032x"
    )


def test_replay_and_recover_are_spans_of_their_own(spans):
    endpoint = factories.endpoint(factories.merchant("acme"))
    event = event_publish(merchant=endpoint.merchant, type="a.b", data={})
    delivery = Delivery.objects.get(event=event)
    Delivery.objects.filter(pk=delivery.pk).update(status="dead", dead_at=utcnow())

    delivery_replay(delivery_id=delivery.pk, now=utcnow())
    Delivery.objects.filter(pk=delivery.pk).update(status="dead", dead_at=utcnow())
    count = deliveries_recover(
        endpoint=endpoint, since=utcnow() - timedelta(hours=1), now=utcnow()
    )

    assert spans.one("relay.replay").attributes["relay.delivery_id"] == delivery.pk
    recover = spans.one("relay.recover")
    assert count == 1
    assert recover.attributes["relay.endpoint_id"] == endpoint.pk
    assert recover.attributes["relay.recovered"] == 1


def test_links_name_each_publish_once_and_skip_what_is_not_a_traceparent():
    other = "00-11111111111111111111111111111111-2222222222222222-01"
    links = tracing.links_to([CALLER, CALLER, other, "", "garbage"])

    assert [format(link.context.trace_id, "032x") for link in links] == [
        CALLER_TRACE,
        "11111111111111111111111111111111",
    ]


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, True),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}, False),
    ],
)
def test_tracing_is_on_only_when_the_otel_environment_asks(environ, wanted):
    assert tracing.tracing_wanted(environ) is wanted
