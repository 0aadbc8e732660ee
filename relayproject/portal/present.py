"""Pure presentation helpers: the curl command, the hourly SVG chart, a URL
shortened for a table column, and a broker endpoint's target and credentials
in words."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from endpoints import brokers, client_credentials
from endpoints.certificate_expiry import endpoint_certificate_expiry

# Every broker URL scheme: an attempt recorded with one went to a broker.
BROKER_SCHEMES = frozenset(s for kind in brokers.SCHEMES.values() for s in kind)


def short_url(url: str) -> str:
    """Host and the path's last part ("host:port/…/orders"): what tells one
    endpoint from another in a narrow column. The page shows the full URL
    beside it (a title)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if not parts.netloc or len(segments) <= 1:
        return url.split("://", 1)[-1]
    return f"{parts.netloc}/…/{segments[-1]}"


def target_words(kind: str, target: dict) -> str:
    """Where in its broker an endpoint publishes ("" for HTTP):
    "exchange 'orders', routing key 'order.paid'"."""
    target = target or {}
    if kind == brokers.RABBITMQ:
        exchange = target.get("exchange") or ""
        named = f"exchange {exchange!r}" if exchange else "the default exchange"
        return f"{named}, routing key {target.get('routing_key') or ''!r}"
    if kind == brokers.NATS:
        return f"subject {target.get('subject')!r}"
    if kind == brokers.REDIS:
        said = f"stream {target.get('stream')!r}"
        if target.get("maxlen"):
            said += f", trimmed to about {target['maxlen']} entries"
        return said
    if kind == brokers.MQTT:
        return f"topic {target.get('topic')!r}, QoS 1"
    return ""


# Where a broker message carries the Standard Webhooks headers, for a consumer.
HEADERS_CARRIED = {
    brokers.RABBITMQ: "the AMQP message's headers",
    brokers.NATS: "the NATS message's headers",
    brokers.REDIS: (
        "the stream entry's fields (the body in field body, each header in a "
        "field of its own, named in lower case)"
    ),
    brokers.MQTT: "the MQTT 5 message's user properties",
}


def credentials_words(credentials: str) -> str:
    """A broker endpoint's credentials as a page may say them: the user, and
    whether a password is set; never the password."""
    if not credentials:
        return "none: it connects without a user or password"
    user, password = brokers.credentials_split(credentials)
    if not user:
        return "a password is set (no user); the password is never shown"
    if not password:
        return f"user {user!r}, no password"
    return f"set: user {user!r} and a password, which is never shown"


def is_broker_url(url: str | None) -> bool:
    """Whether a recorded request went to a broker (its URL's scheme says)."""
    return (url or "").split("://", 1)[0].lower() in BROKER_SCHEMES


def answer_heading(to_broker: Sequence[bool]) -> str:
    """The attempts table's answer column: what every attempt in it got."""
    if to_broker and all(to_broker):
        return "Broker's answer"
    return "Answer (excerpt)" if any(to_broker) else "Response (excerpt)"


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


def credentials_state(endpoint, *, now) -> dict:
    """An HTTP endpoint's auth and client certificate as pages show them
    (never a secret), and the certificate's expiry warning when it is due."""
    if endpoint.kind != brokers.HTTP:
        return {}
    has_cert = bool(endpoint.tls_client_cert and endpoint.tls_not_after)
    return {
        "auth_state": client_credentials.auth_shown(endpoint),
        "tls_state": client_credentials.tls_shown(endpoint, now=now),
        # Set when inside the warning window or past expiry (its words say so).
        "cert_expiry": endpoint_certificate_expiry(endpoint, now=now)
        if has_cert
        else None,
        "cert_days_left": (endpoint.tls_not_after - now).days if has_cert else None,
    }
