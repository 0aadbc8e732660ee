"""Pure presentation helpers: the breaker in words and the hourly SVG chart."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from endpoints.models import EndpointHealth


def _hm(value: datetime | None) -> str:
    return value.strftime("%H:%M") if value else "?"


def breaker_words(health: EndpointHealth | None) -> str:
    """E.g. "opened at 14:02 after 10 consecutive failures; next probe at 14:07"."""
    if health is None:
        return "closed: no delivery has been recorded yet"
    failures = health.consecutive_failures
    plural = "" if failures == 1 else "s"
    if health.breaker_state == EndpointHealth.State.OPEN:
        words = (
            f"opened at {_hm(health.opened_at)} after {failures} consecutive "
            f"failure{plural}; next probe at {_hm(health.next_probe_at)}"
        )
    elif health.breaker_state == EndpointHealth.State.HALF_OPEN:
        words = (
            f"half-open since {_hm(health.next_probe_at)}: one probe delivery "
            f"decides whether it closes (after {failures} consecutive failure{plural})"
        )
    elif failures:
        words = (
            f"closed, {failures} consecutive failure{plural} so far; it opens at "
            f"{health.failure_threshold}"
        )
    else:
        words = "closed: deliveries flow normally"
    if health.breaker_reason and health.breaker_state != EndpointHealth.State.CLOSED:
        words += f" (last error: {health.breaker_reason})"
    return words


WIDTH, HEIGHT, PAD = 480, 120, 18


def hourly_chart(hours: Sequence) -> SafeString:
    """Bars of attempts per hour (grey) with the failures in them (red), as inline SVG."""
    peak = max([h.attempts for h in hours] + [1])
    slot = (WIDTH - 2 * PAD) / max(len(hours), 1)
    plot = HEIGHT - 2 * PAD
    bars = []
    for i, hour in enumerate(hours):
        x = PAD + i * slot
        total = plot * hour.attempts / peak
        failed = plot * hour.failures / peak
        label = (
            f"{hour.start:%H}:00 UTC: {hour.attempts} attempts, {hour.failures} failed"
        )
        bars.append(
            (
                f"{x + 1:.1f}",
                f"{HEIGHT - PAD - total:.1f}",
                f"{slot - 2:.1f}",
                f"{total:.1f}",
                f"{HEIGHT - PAD - failed:.1f}",
                f"{failed:.1f}",
                label,
            )
        )
    body = format_html_join(
        "",
        '<g><title>{6}</title><rect class="ok" x="{0}" y="{1}" width="{2}" '
        'height="{3}"/><rect class="fail" x="{0}" y="{4}" width="{2}" '
        'height="{5}"/></g>',
        bars,
    )
    first = f"{hours[0].start:%H}:00" if hours else ""
    last = f"{hours[-1].start:%H}:00" if hours else ""
    return format_html(
        '<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'role="img" aria-label="Attempts and failures per hour, last 24 hours">'
        '<line x1="{p}" y1="{base}" x2="{right}" y2="{base}" class="axis"/>{body}'
        '<text x="{p}" y="{h}" class="tick">{first}</text>'
        '<text x="{right}" y="{h}" class="tick" text-anchor="end">{last}</text>'
        '<text x="{p}" y="12" class="tick">peak {peak}/h</text></svg>',
        w=WIDTH,
        h=HEIGHT,
        p=PAD,
        base=HEIGHT - PAD,
        right=WIDTH - PAD,
        body=body,
        first=first,
        last=last,
        peak=peak,
    )
