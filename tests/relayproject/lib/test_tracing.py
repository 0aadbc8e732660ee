"""spans_made(): the hot paths' question "would a span be kept at all?".

Asked in a fresh interpreter: this test process installs an in-memory
provider for the span tests (tests/support/spans.py), and OpenTelemetry lets
a process set its provider once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from relayproject.lib.tracing import spans_made
before = spans_made()
trace.set_tracer_provider(TracerProvider())
print(before, spans_made())
"""


def test_spans_are_made_once_any_provider_is_installed_and_not_before():
    env = {"PATH": "/usr/bin:/bin"}  # no OTEL_* variable
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["False", "True"]
