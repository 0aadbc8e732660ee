"""OpenTelemetry tracing: one tracer, configured from the standard OTEL_* variables.

The code always talks to the OpenTelemetry API. With no SDK configured the
API's tracer is a no-op: a span costs one function call and nothing is kept
(see bench/RESULTS.md, "Tracing overhead"). The SDK and the OTLP exporter are
set up only when the environment asks for them, so a process that embeds
`event_publish` inside its own traced service keeps its own provider.

Spans (docs/pages/operations/tracing.md):
  relay.publish   POST /events, /events/batch and event_publish; its W3C
                  context is stored on each event (Event.traceparent)
  relay.claim     one claim by a dispatcher
  <METHOD>        one HTTP attempt (kind CLIENT), linked to the publish span
  relay.record    one flush of outcomes; breaker.opened / breaker.closed events
  relay.replay, relay.recover
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterable

from django.core.exceptions import ImproperlyConfigured
from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

tracer = trace.get_tracer("webhook-relay")
_propagator = TraceContextTextMapPropagator()
_configured = False


def tracing_wanted(environ: dict[str, str] | None = None) -> bool:
    """True when OTEL_* variables ask for the SDK in this process.

    OTEL_TRACES_EXPORTER=none gives the SDK without an exporter (spans are
    made and dropped: the benchmark's middle row). Nothing set: no SDK at all.
    """
    environ = os.environ if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    return bool(
        exporter
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def tracing_configure(environ: dict[str, str] | None = None) -> bool:
    """Install the SDK, an OTLP/HTTP exporter and the Django instrumentation.

    Idempotent and a no-op unless tracing_wanted(). Sampling and the service
    name come from OTEL_TRACES_SAMPLER(_ARG) and OTEL_SERVICE_NAME, read by
    the SDK itself.
    """
    global _configured
    environ = os.environ if environ is None else environ
    if _configured or not tracing_wanted(environ):
        return False
    exporter_name = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    _sdk_check(exporter_name)
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    service = environ.get("OTEL_SERVICE_NAME") or "webhook-relay"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    if exporter_name == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name != "none":  # "none": spans are made, sampled, not exported
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _instrument_django()
    _configured = True
    log.info("tracing on: service %s", service)
    return True


# The package's `tracing` extra (the API alone, always installed, is a no-op).
SDK_MODULES = ("opentelemetry.sdk", "opentelemetry.instrumentation.django")
OTLP_MODULE = "opentelemetry.exporter.otlp.proto.http"


def _absent(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # a parent package is missing too
        return True


def _sdk_check(exporter_name: str) -> None:
    otlp = exporter_name not in ("console", "none")
    wanted = [*SDK_MODULES, *([OTLP_MODULE] if otlp else [])]
    missing = [name for name in wanted if _absent(name)]
    if missing:
        raise ImproperlyConfigured(
            "OTEL_* variables ask for tracing, but this installation has no "
            f"{' or '.join(missing)}: install webhook-relay[tracing], or set "
            "OTEL_SDK_DISABLED=true."
        )


def spans_made() -> bool:
    """False while no tracer provider is installed in this process.

    Then every span is the API's no-op and every attribute built for one is
    thrown away: a hot path (the dispatcher's send, once per delivery) asks
    this first and skips the work. Any provider at all (the SDK, a test's,
    an embedding service's) makes it True, and spans are made as before.
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tracing_flush(timeout_millis: int = 5000) -> None:
    """Export what is buffered (a dispatcher calls it when it stops)."""
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if flush is not None:
        flush(timeout_millis)


def _instrument_django() -> None:
    # Server spans for every request, continuing the caller's traceparent, so
    # a publish shows up inside the publishing service's own trace.
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()


def current_traceparent() -> str:
    """The W3C traceparent of the current span, or "" when nothing is traced."""
    if not trace.get_current_span().get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")


def span_context_of(traceparent: str) -> SpanContext | None:
    """The remote span context a stored traceparent names, if it is valid."""
    if not traceparent:
        return None
    context = _propagator.extract({"traceparent": traceparent})
    span_context = trace.get_current_span(context).get_span_context()
    return span_context if span_context.is_valid else None


def links_to(traceparents: Iterable[str]) -> list[Link]:
    """Links from a new span to the publish spans of the events it works on."""
    seen: set[str] = set()
    links = []
    for traceparent in traceparents:
        if traceparent in seen:
            continue
        seen.add(traceparent)
        span_context = span_context_of(traceparent)
        if span_context is not None:
            links.append(Link(span_context))
    return links


def span_event(name: str, attributes: dict | None = None) -> None:
    """Add an event to the current span (breaker transitions, for one)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, attributes or {})
