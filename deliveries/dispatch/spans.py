"""The dispatcher's spans: claim, one CLIENT span per attempt, record.

The send span follows OpenTelemetry's HTTP client conventions (name is the
method; http.request.method, url.full without its query, server.address,
server.port, http.response.status_code, error.type) and adds relay.*
attributes. It is not a child of the publish span, which ended long ago in
another process: it LINKS to the publish context stored on the event, so a
retry an hour later still leads back to the trace that published it.
Attributes hold ids, numbers and the URL's host and path: never the payload,
the secret, custom header values or the receiver's body.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from deliveries import retry
from endpoints import brokers
from relayproject.lib.tracing import links_to, tracer


def url_without_query(url: str) -> str:
    """The URL as traced: no query string, fragment or credentials."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def attempt_outcome(
    job, *, status_code: int | None, error_kind: str, acknowledged: bool = False
) -> str:
    """What this attempt means for its delivery (before fencing)."""
    verdict = retry.classify(
        status_code=status_code,
        error_kind=error_kind or None,
        permanent=job.permanent_statuses,
        acknowledged=acknowledged,
    )
    used = job.attempt_count + 1 - job.budget_start
    if verdict == retry.Verdict.RETRY and used >= job.max_attempts:
        return str(retry.Verdict.DEAD)
    return str(verdict)


@contextlib.contextmanager
def claim_span(*, worker_id: str) -> Iterator[Span]:
    with tracer.start_as_current_span(
        "relay.claim", attributes={"relay.worker": worker_id}
    ) as span:
        yield span


def claim_span_end(span: Span, *, claimed: int, reclaimed: int, probes: int) -> None:
    if span.is_recording():
        span.set_attribute("relay.claimed", claimed)
        span.set_attribute("relay.reclaimed", reclaimed)
        span.set_attribute("relay.probes", probes)


def send_span_start(job) -> Span:
    """Start (not enter) the attempt's span; send_span_end() ends it."""
    links = links_to([job.traceparent]) if job.traceparent else []
    parts = urlsplit(job.url)
    if job.kind == brokers.HTTP:
        name = "POST"
        attributes = {
            "http.request.method": "POST",
            "url.full": url_without_query(job.url),
            "server.address": parts.hostname or "",
            "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        }
    else:
        name, attributes = _publish_attributes(job, parts)
    attributes |= {
        "relay.delivery_id": job.delivery_id,
        "relay.event_id": job.event_id,
        "relay.endpoint_id": job.endpoint_id,
        "relay.attempt": job.attempt_count + 1,
        "relay.probe": bool(job.is_probe),
        "relay.reclaim": job.is_reclaim,
    }
    if job.merchant_id is not None:
        attributes["relay.merchant_id"] = job.merchant_id
    # A root of its own (an empty parent context), whatever span the loop's
    # thread happens to be in: one attempt, one trace, linked to the publish.
    return tracer.start_span(
        name,
        context=Context(),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        links=links,
    )


def send_span_end(span: Span, job, result) -> None:
    """Status, error type and outcome of the attempt, then end the span."""
    if span.is_recording():
        outcome = attempt_outcome(
            job,
            status_code=result.status_code,
            error_kind=result.error_kind,
            acknowledged=result.acknowledged,
        )
        span.set_attribute("relay.outcome", outcome)
        span.set_attribute("relay.duration_ms", round(result.duration_ms, 3))
        if result.status_code is not None:
            span.set_attribute("http.response.status_code", result.status_code)
        error_type = result.error_kind or (
            str(result.status_code)
            if result.status_code is not None and result.status_code >= 400
            else ""
        )
        if error_type:
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR))
    span.end()


# OpenTelemetry's messaging conventions: the destination each kind names.
_DESTINATION = {
    brokers.RABBITMQ: "exchange",
    brokers.NATS: "subject",
    brokers.REDIS: "stream",
    brokers.MQTT: "topic",
}


def _publish_attributes(job, parts) -> tuple[str, dict]:
    """A broker attempt's span: "send <destination>" with messaging.* attributes."""
    destination = str(job.target.get(_DESTINATION.get(job.kind, ""), ""))
    default_port = brokers.SCHEMES.get(job.kind, {}).get(parts.scheme, (0, False))[0]
    attributes = {
        "messaging.system": job.kind,
        "messaging.operation.type": "send",
        "messaging.destination.name": destination,
        "server.address": parts.hostname or "",
        "server.port": parts.port or default_port,
        "url.full": url_without_query(job.url),
    }
    if job.kind == brokers.RABBITMQ:
        attributes["messaging.rabbitmq.destination.routing_key"] = str(
            job.target.get("routing_key", "")
        )
    return f"send {destination}".rstrip(), attributes


def traceparent_header(span: Span) -> str:
    """The header value that continues this span (RELAY_SEND_TRACEPARENT)."""
    context = span.get_span_context()
    if not context.is_valid:
        return ""
    flags = "01" if context.trace_flags.sampled else "00"
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags}"


@contextlib.contextmanager
def record_span(*, worker_id: str, outcomes: int) -> Iterator[Span]:
    with tracer.start_as_current_span(
        "relay.record",
        attributes={"relay.worker": worker_id, "relay.outcomes": outcomes},
    ) as span:
        yield span
