"""A broker attempt's send span: OpenTelemetry's messaging conventions, an
acknowledgement traced as a success, and no credential anywhere."""

from __future__ import annotations

from opentelemetry.trace import SpanKind, StatusCode

from deliveries.dispatch import spans as dispatch_spans
from deliveries.dispatch.transport import SendResult
from tests.support.jobs import a_job


def broker_job(**changes):
    fields = {
        "kind": "rabbitmq",
        "url": "amqps://mq.example.com:5671/shop",
        "target": {"exchange": "orders", "routing_key": "paid"},
        "broker_credentials": "app:hunter2-span",
        "attempt_count": 0,
    }
    return a_job(**(fields | changes))


def test_a_broker_send_span_follows_the_messaging_conventions(spans):
    job = broker_job()
    span = dispatch_spans.send_span_start(job)
    dispatch_spans.send_span_end(
        span, job, SendResult(None, 4.0, body_excerpt="ack", acknowledged=True)
    )

    sent = spans.one("send orders")
    assert sent.kind == SpanKind.CLIENT
    assert sent.attributes["messaging.system"] == "rabbitmq"
    assert sent.attributes["messaging.operation.type"] == "send"
    assert sent.attributes["messaging.destination.name"] == "orders"
    assert sent.attributes["messaging.rabbitmq.destination.routing_key"] == "paid"
    assert sent.attributes["server.address"] == "mq.example.com"
    assert sent.attributes["server.port"] == 5671
    assert "http.request.method" not in sent.attributes
    # An acknowledgement is a success, though it has no HTTP status.
    assert sent.attributes["relay.outcome"] == "succeeded"
    assert sent.status.status_code == StatusCode.UNSET
    assert "hunter2" not in spans.text()


def test_a_refused_publish_is_an_error_span_with_its_kind(spans):
    job = broker_job(kind="redis", url="redis://r.example.com", target={"stream": "s"})
    span = dispatch_spans.send_span_start(job)
    dispatch_spans.send_span_end(
        span, job, SendResult(None, 2.0, "broker_refused", "WRONGTYPE")
    )

    sent = spans.one("send s")
    assert sent.attributes["server.port"] == 6379
    assert sent.attributes["error.type"] == "broker_refused"
    assert sent.attributes["relay.outcome"] == "retry"
    assert sent.status.status_code == StatusCode.ERROR
