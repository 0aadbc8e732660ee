"""How the relay names an endpoint's state for people: one vocabulary.

The breaker is never "closed" or "open" to a merchant: an endpoint is
*sending*, *paused* (after N failures, until the next try), *testing* (one
delivery decides whether sending resumes), *degraded* (its 24 h success rate
is under DEGRADED_SUCCESS_RATE) or *disabled*. The API keeps its
machine-stable ``breaker_state`` values; these words are for pages, alerts
and emails. Pure: each function reads the rows it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus

from endpoints import breaker
from endpoints.models import EndpointHealth

# breaker_state values (the API's, machine-stable) as people read them.
STATE_WORDS = {"closed": "sending", "open": "paused", "half_open": "testing"}
# Fewer attempts than this in 24 h say too little to call an endpoint degraded.
DEGRADED_MIN_SAMPLES = 20


# The error kinds a breaker's stored reason names (deliveries.models.ErrorKind).
_KIND_SHORT = {
    "timeout": "timed out",
    "connection_error": "could not connect",
    "dns_error": "the host name did not resolve",
    "tls_error": "TLS failed",
    "invalid_response": "the response could not be read",
    "lease_expired": "the dispatcher sending it stopped",
    "destination_blocked": "destination refused",
    "no_signing_secret": "no live signing secret",
}
_LAST = re.compile(r"\(last: ([^)]*)\)")
_HTTP = re.compile(r"^http (\d{3})$")


def status_words(code: int | None) -> str:
    """ "HTTP 401 Unauthorized"; "HTTP 599" for a code without a name."""
    if code is None:
        return ""
    try:
        return f"HTTP {code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


def reason_last_error(reason: str) -> str:
    """The last error a stored breaker reason names, in words ("" if none)."""
    found = _LAST.search(reason or "")
    if not found:
        return ""
    last = found.group(1).strip()
    status = _HTTP.fullmatch(last)
    if status:
        return status_words(int(status.group(1)))
    return _KIND_SHORT.get(last, last.replace("_", " "))


_OPENED = re.compile(r"^(?:opened after )?(\d+) consecutive failures")
_REOPENED = re.compile(r"^probe failed, reopened for ([\d.]+)s")


def pause_why(reason: str) -> str:
    """Why an endpoint is paused, from its stored breaker reason, said after
    "paused": " after 10 failures in a row (last: could not connect)". A
    reason written by a person is given as written, in brackets."""
    last = reason_last_error(reason)
    tail = f" (last: {last})" if last else ""
    opened = _OPENED.match(reason or "")
    if opened:
        return f" after {_failures(int(opened.group(1)))} in a row{tail}"
    reopened = _REOPENED.match(reason or "")
    if reopened:
        wait = float(reopened.group(1))
        return f" again for {wait:g} s, the test delivery failed too{tail}"
    return f" ({reason})" if reason else ""


def reason_words(reason: str) -> str:
    """A stored breaker reason as a sentence: "opened after 10 consecutive
    failures (last: connection_error)" is "Paused after 10 failures in a row
    (last: could not connect)"."""
    return "Paused" + pause_why(reason)


def _hm(value: datetime | None) -> str:
    return value.strftime("%H:%M") if value else "?"


def _failures(n: int) -> str:
    return f"{n} failure{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Label:
    css: str  # a badge class of the portal's and the console's CSS
    text: str


def is_degraded(health: EndpointHealth | None, *, below: float) -> bool:
    """Its 24 h success rate is under `below` (0-1) over enough attempts."""
    return (
        health is not None
        and health.success_rate is not None
        and health.sample_count >= DEGRADED_MIN_SAMPLES
        and health.success_rate < below
    )


def state_label(
    health: EndpointHealth | None, *, active: bool, degraded_below: float
) -> Label:
    """The one-word state of an endpoint, as a badge."""
    if not active:
        return Label("bad", "Disabled")
    if health is not None and health.breaker_state == EndpointHealth.State.OPEN:
        return Label("bad", "Paused")
    if health is not None and health.breaker_state == EndpointHealth.State.HALF_OPEN:
        return Label("warn", "Testing")
    if is_degraded(health, below=degraded_below):
        return Label("warn", "Degraded")
    return Label("succeeded", "Sending")


def breaker_words(health: EndpointHealth | None, *, active: bool = True) -> str:
    """E.g. "Paused after 10 failures, next try 11:39 UTC (last: HTTP 503)"."""
    if not active:
        # "deliveries flow normally" beside a disabled endpoint misleads.
        return "Not in use: the endpoint is disabled, nothing is sent"
    if health is None:
        return "Sending: no delivery has been recorded yet"
    failures = health.consecutive_failures
    last = reason_last_error(health.breaker_reason)
    if failures:
        why = f" after {_failures(failures)} in a row"
        why += f" (last: {last})" if last else ""
    else:
        # Paused by hand (the stored reason says by whom), or a failed test
        # delivery's reason, in words.
        why = pause_why(health.breaker_reason)
    if health.breaker_state == EndpointHealth.State.OPEN:
        again = ""
        if health.breaker_reason.startswith("probe failed"):
            again = "; the test delivery failed too, so the pause doubled"
        return (
            f"Paused at {_hm(health.opened_at)} UTC{why}, next try "
            f"{_hm(health.next_probe_at)} UTC{again}. Nothing is sent and no "
            "attempt is spent until then"
        )
    if health.breaker_state == EndpointHealth.State.HALF_OPEN:
        return (
            f"Testing since {_hm(health.next_probe_at)} UTC: one delivery decides "
            f"whether sending resumes (paused{why})"
        )
    if failures:
        return (
            f"Sending; {_failures(failures)} in a row so far, it pauses at "
            f"{health.failure_threshold}"
        )
    return "Sending normally"


def slow_words(health: EndpointHealth | None, *, base_threshold: int) -> str:
    """What slowness does to an endpoint, by the breaker's real rule
    (endpoints.breaker: the threshold halves only above VERY_SLOW_P95_MS)."""
    if health is None or health.p95_ms is None:
        return ""
    if health.sample_count < breaker.MIN_SAMPLES:
        return ""
    p95 = f"p95 {health.p95_ms:,.0f} ms"
    threshold = breaker.effective_threshold(
        base_threshold=base_threshold, p95_ms=health.p95_ms, samples=health.sample_count
    )
    if threshold < base_threshold:
        return (
            f"This endpoint is very slow ({p95}, over "
            f"{breaker.VERY_SLOW_P95_MS / 1000:g} s): it is paused after "
            f"{_failures(threshold)} in a row instead of {base_threshold}."
        )
    if health.p95_ms > breaker.SLOW_P95_MS:
        return (
            f"This endpoint is slow ({p95}, over {breaker.SLOW_P95_MS / 1000:g} s). "
            f"Over {breaker.VERY_SLOW_P95_MS / 1000:g} s it would be paused after "
            f"{_failures(max(1, base_threshold // 2))} in a row instead of "
            f"{base_threshold}."
        )
    return ""


def degraded_words(health: EndpointHealth | None, *, below: float) -> str:
    """ "Degraded: 54% of 312 attempts succeeded in 24 h (under 90%)", or ""."""
    if not is_degraded(health, below=below):
        return ""
    return (
        f"Degraded: {health.success_rate * 100:.0f}% of {health.sample_count} "
        f"attempts succeeded in 24 h (under {below * 100:g}%)"
    )
