"""Pure presentation helpers: the curl command, the hourly SVG chart and a
URL shortened for a table column."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString


def short_url(url: str) -> str:
    """Host and the path's last part ("host:port/…/orders"): what tells one
    endpoint from another in a narrow column. The page shows the full URL
    beside it (a title)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if not parts.netloc or len(segments) <= 1:
        return url.split("://", 1)[-1]
    return f"{parts.netloc}/…/{segments[-1]}"


# curl sets these itself; copying ours would only mislead.
_NOT_FOR_CURL = frozenset({"User-Agent", "Accept-Encoding"})


def curl_command(
    url: str,
    headers: Sequence[tuple[str, str]],
    body: str,
    *,
    body_file: str | None = None,
) -> str:
    """The request as a curl command a merchant can paste to try their receiver.

    Headers whose value is not known (set at send time, or hidden) are left out
    rather than sent wrong. With body_file, the body is read from that file
    (a large body downloaded from the page) instead of being written inline.
    """
    lines = [f"curl -X POST {shlex.quote(url)}"]
    for name, value in headers:
        if value.startswith(("(", "•", "redacted")) or name in _NOT_FOR_CURL:
            continue
        lines.append(f"  -H {shlex.quote(f'{name}: {value}')}")
    data = f"@{body_file}" if body_file else body
    lines.append(f"  --data-binary {shlex.quote(data)}")
    return " \\\n".join(lines)


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
    # Dates on both ends: "22:00 ... 21:00" alone reads as if time ran backwards.
    first = f"{hours[0].start:%b %-d, %H}:00" if hours else ""
    last = f"{hours[-1].start:%b %-d, %H}:00 UTC" if hours else ""
    total = sum(h.attempts for h in hours)
    peak_text = f"peak {peak}/h" if total else "no attempts in the last 24 h"
    # The bars stretch to the card's width (preserveAspectRatio="none"); the
    # words are HTML below them, so they keep their size at any width.
    return format_html(
        '<figure class="chart"><figcaption class="tick">{peak_text}</figcaption>'
        '<svg class="chart" viewBox="0 0 {w} {h}" preserveAspectRatio="none" '
        'role="img" aria-label="Attempts and failures per hour, last 24 hours">'
        '<line x1="{p}" y1="{base}" x2="{right}" y2="{base}" class="axis" '
        'vector-effect="non-scaling-stroke"/>{body}</svg>'
        '<div class="ticks"><span>{first}</span><span>{last}</span></div></figure>',
        w=WIDTH,
        h=HEIGHT,
        p=PAD,
        right=WIDTH - PAD,
        base=HEIGHT - PAD,
        body=body,
        first=first,
        last=last,
        peak_text=peak_text,
    )


@dataclass(frozen=True)
class TypeOption:
    name: str
    description: str
    deprecated: bool
    checked: bool


def type_groups(
    names: Sequence[str], *, described: dict, checked: Sequence[str]
) -> list[tuple[str, list[TypeOption]]]:
    """The event-type picker's options, grouped by the name's first part
    ("payment" for payment.captured), groups and names in order.

    `described` maps a catalogue name to (description, deprecated); a type the
    merchant published that the catalogue does not describe has neither.
    """
    groups: dict[str, list[TypeOption]] = {}
    for name in sorted(names):
        description, deprecated = described.get(name, ("", False))
        groups.setdefault(name.split(".", 1)[0], []).append(
            TypeOption(name, description, deprecated, name in checked)
        )
    return sorted(groups.items())
