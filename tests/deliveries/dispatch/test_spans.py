"""The send span's attributes, outcome and links, from a real Job and SendResult."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from deliveries.dispatch import spans as dispatch_spans
from deliveries.dispatch.transport import SendResult
from tests.support.jobs import a_job


@pytest.mark.parametrize(
    ("url", "traced"),
    [
        ("https://a.example/x?q=1", "https://a.example/x"),
        ("http://u:p@127.0.0.1:8080/h#f", "http://127.0.0.1:8080/h"),
        ("https://[::1]:9/p", "https://[::1]:9/p"),
    ],
)
def test_the_traced_url_has_no_query_fragment_or_credentials(url, traced):
    assert dispatch_spans.url_without_query(url) == traced


def test_a_send_span_follows_the_http_client_conventions_and_links_the_publish(spans):
    job = a_job()
    span = dispatch_spans.send_span_start(job)
    dispatch_spans.send_span_end(
        span, job, SendResult(status_code=503, duration_ms=12.5)
    )

    sent = spans.one("POST")
    assert sent.kind == SpanKind.CLIENT
    assert sent.attributes["http.request.method"] == "POST"
    assert sent.attributes["url.full"] == "https://hooks.example.com:8443/in/x"
    assert sent.attributes["server.address"] == "hooks.example.com"
    assert sent.attributes["server.port"] == 8443
    assert sent.attributes["http.response.status_code"] == 503
    assert sent.attributes["error.type"] == "503"
    assert sent.attributes["relay.attempt"] == 3
    assert sent.attributes["relay.merchant_id"] == 7
    assert sent.attributes["relay.reclaim"] is False
    # The third of three attempts failing with a retryable status: dead.
    assert sent.attributes["relay.outcome"] == "dead"
    assert sent.status.status_code == StatusCode.ERROR
    assert [
        (format(link.context.trace_id, "032x"), format(link.context.span_id, "016x"))
        for link in sent.links
    ] == [("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")]
    text = spans.text()
    for secret in ("s3cret", "4242", "whsec_", "pw@"):
        assert secret not in text


def test_a_transport_error_is_the_error_type_and_a_success_has_none(spans):
    first = a_job(attempt_count=0)
    span = dispatch_spans.send_span_start(first)
    dispatch_spans.send_span_end(
        span,
        first,
        SendResult(status_code=None, duration_ms=3000, error_kind="timeout"),
    )
    span = dispatch_spans.send_span_start(first)
    dispatch_spans.send_span_end(
        span, first, SendResult(status_code=200, duration_ms=9)
    )

    failed, ok = spans.named("POST")
    assert failed.attributes["error.type"] == "timeout"
    assert failed.attributes["relay.outcome"] == "retry"
    assert "http.response.status_code" not in failed.attributes
    assert ok.attributes["relay.outcome"] == "succeeded"
    assert "error.type" not in ok.attributes
    assert ok.status.status_code == StatusCode.UNSET


def test_the_traceparent_header_continues_the_send_span(spans):
    job = a_job()
    span = dispatch_spans.send_span_start(job)
    header = dispatch_spans.traceparent_header(span)
    dispatch_spans.send_span_end(span, job, SendResult(status_code=200, duration_ms=1))

    sent = spans.one("POST")
    assert header == (f"00-{sent.context.trace_id:032x}-{sent.context.span_id:016x}-01")
