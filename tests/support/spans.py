"""An in-memory OpenTelemetry SDK for tests: what spans the code really makes.

OpenTelemetry lets a process set its tracer provider once, so the provider is
installed on first use and kept; each test gets an emptied exporter. The
Django instrumentation is switched on too, as tracing_configure() does in a
real process, so a request's incoming traceparent is honoured.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from relayproject.lib import tracing

_exporter: InMemorySpanExporter | None = None


def memory_exporter() -> InMemorySpanExporter:
    global _exporter
    if _exporter is None:
        _exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
        tracing._instrument_django()
    _exporter.clear()
    return _exporter


class Spans:
    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        return [s.name for s in self.all()]

    def text(self) -> str:
        """Every attribute and event of every span, for leak checks."""
        parts = []
        for span in self.all():
            parts.append(span.name)
            parts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
            for event in span.events:
                parts.append(event.name)
                parts += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
        return "\n".join(parts)
