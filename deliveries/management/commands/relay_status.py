"""python manage.py relay_status [--json] [--check]: pipeline, alerts, dead letters.

With --check the exit status is 1 when there is any alert (deliveries.ops.alerts),
so cron, a Kubernetes probe or a monitoring agent can page on it.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from deliveries.ops import alerts, latency
from deliveries.ops.held import human_seconds
from deliveries.ops.summary import WINDOWS, PipelineSummary, dead_letter_analysis
from deliveries.words import last_error_words
from endpoints.broker_fields import kinds_offered
from endpoints.selectors import destinations_summary
from endpoints.words import STATE_WORDS, status_words
from relayproject.lib import citus
from relayproject.lib.clock import utcnow


def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _iso(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _error(last_error: str) -> str:
    """A stored last_error in the pages' words (--json keeps the stored value)."""
    return last_error_words(last_error=last_error, status_code=None) or "-"


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _database_document() -> dict:
    cluster = citus.cluster()
    return {"citus": cluster.as_dict() if cluster else None}


def _database_line() -> str:
    cluster = citus.cluster()
    if cluster is None:
        return "Database: not Citus (one PostgreSQL or SQLite)"
    return (
        f"Database: Citus {cluster.version}, {cluster.workers} worker(s), "
        f"{cluster.distributed} of {len(citus.DISTRIBUTED)} tables distributed by "
        f"merchant, {cluster.reference} of {len(citus.REFERENCE)} reference tables"
    )


def _destinations_document() -> dict:
    return {
        **destinations_summary(),
        "broker_kinds_offered": list(kinds_offered()),
        "broker_hosts": list(settings.RELAY_BROKER_HOSTS),
    }


def _destinations_line() -> str:
    d = _destinations_document()
    counts = ", ".join(f"{n} {kind}" for kind, n in d["endpoints_by_kind"].items())
    own = d["merchants_with_own_broker_hosts"]
    if not d["broker_kinds_offered"]:
        brokers = "off (RELAY_BROKER_KINDS is empty)"
    elif not d["broker_hosts"] and not own:
        brokers = "off (RELAY_BROKER_HOSTS is empty and no merchant has its own list)"
    else:
        hosts = ", ".join(d["broker_hosts"]) or "none"
        brokers = (
            f"{', '.join(d['broker_kinds_offered'])} to hosts {hosts} "
            f"(RELAY_BROKER_HOSTS); {own} merchant(s) with their own list"
        )
    return f"Endpoints by kind: {counts or 'none'}; broker destinations: {brokers}"


def _latency_document(waits: latency.PublishLatency) -> dict:
    """Seconds, keyed "pipeline" and by endpoint id."""

    def of(table: dict[str, latency.Percentiles]) -> dict:
        return {(key or "pipeline"): asdict(value) for key, value in table.items()}

    return {
        "publish_to_first_attempt_seconds": of(waits.first_attempt),
        "publish_to_success_seconds": of(waits.success),
    }


def _latency_lines(waits: latency.PublishLatency) -> list[str]:
    rows = latency.latency_rows(waits, limit=10)
    if not rows:
        return ["Publish to delivery, last 24 h: no delivery published"]
    return [
        "Publish to delivery, last 24 h (slowest endpoints to success first)",
        *_table(
            [
                "endpoint",
                "to first p50",
                "to first p95",
                "to first p99",
                "to success p50",
                "to success p95",
                "to success p99",
                "delivered",
            ],
            [
                [row.endpoint_id or "whole pipeline", *row.cells, row.delivered]
                for row in rows
            ],
        ),
    ]


def _dispatchers_document(*, now: datetime) -> dict:
    alive, stale = alerts.dispatchers(now=now)
    dead, released = alerts.dispatcher_rescue_totals()
    return {
        "declared_dead_total": dead,
        "released_from_dead_total": released,
        "processes": [
            {
                "worker_id": d.worker_id,
                "hostname": d.hostname,
                "pid": d.pid,
                "started_at": d.started_at,
                "last_seen_at": d.last_seen_at,
                "alive": d in alive,
                "declared_dead_at": d.declared_dead_at,
                "deaths": d.deaths,
                "released": d.released,
            }
            for d in [*stale, *alive]
        ],
    }


def _dispatchers_lines(*, now: datetime) -> list[str]:
    alive, stale = alerts.dispatchers(now=now)
    dead, released = alerts.dispatcher_rescue_totals()
    lines = [
        f"Dispatchers: {len(alive)} alive, {len(stale)} stale; declared dead so far:"
        f" {dead}, deliveries released from them: {released}"
    ]
    if alive or stale:
        lines += _table(
            ["worker", "host, pid", "last seen", "state"],
            [
                [
                    d.worker_id,
                    f"{d.hostname}, {d.pid}",
                    _time(d.last_seen_at),
                    alerts.dispatcher_state(d, now=now),
                ]
                for d in [*stale, *alive]
            ],
        )
    return lines


class Command(BaseCommand):
    help = "Pipeline health summary, dead-letter analysis and slow endpoints."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="one JSON document")
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit with status 1 when there is any alert",
        )
        parser.add_argument(
            "--window",
            choices=list(WINDOWS),
            default="24h",
            help="dead-letter analysis window (default 24h)",
        )

    def handle(self, *args, **options) -> None:
        summary = self.report(options)
        if options["check"] and summary.alerts:
            raise CommandError(f"{len(summary.alerts)} alert(s)", returncode=1)

    def report(self, options) -> PipelineSummary:
        now = utcnow()
        summary = alerts.pipeline_summary(now=now)
        analysis = dead_letter_analysis(
            since=now - WINDOWS[options["window"]], until=now
        )
        waits, _ = latency.publish_latency_recent(now=now)
        if options["json"]:
            document = {
                "summary": asdict(summary),
                "database": _database_document(),
                "destinations": _destinations_document(),
                "dispatchers": _dispatchers_document(now=now),
                "latency_24h": _latency_document(waits),
                "dead_letters": {
                    "window": options["window"],
                    "endpoints": [asdict(g) for g in analysis],
                },
            }
            self.stdout.write(json.dumps(document, indent=2, default=_iso))
            return summary
        s = summary
        lines = [
            _database_line(),
            _destinations_line(),
            f"Pipeline at {_time(s.now)} UTC",
            *_table(
                ["", "count"],
                [
                    ["pending (due now)", s.pending],
                    ["held (paused/disabled)", s.held],
                    ["awaiting retry", s.awaiting_retry],
                    ["in flight", s.in_flight],
                    ["waiting in ordered lanes", s.waiting],
                    ["dead", s.dead],
                    ["delivered, last hour", s.delivered_last_hour],
                    ["failed (dead), last hour", s.failed_last_hour],
                    ["dead, last 24 h", s.dead_last_24h],
                    ["dead, 24 h before", s.dead_previous_24h],
                ],
            ),
            f"oldest pending: {s.oldest_pending_id or 'none'}"
            + (
                f", waiting {human_seconds(s.oldest_pending_age_seconds)}"
                if s.oldest_pending_id
                else ""
            ),
            "publish to success, average over the last hour: "
            + human_seconds(s.avg_latency_seconds_last_hour),
            "",
            *_latency_lines(waits),
            "",
        ]
        lines += [f"WARNING: {alert.text}" for alert in s.alerts] or ["no alerts"]
        lines += ["", *_dispatchers_lines(now=now)]
        lines += ["", f"Dead letters per endpoint, last {options['window']}"]
        if analysis:
            lines += _table(
                [
                    "endpoint",
                    "url",
                    "dead",
                    "top error",
                    "top status",
                    "first",
                    "last",
                    "avg attempts",
                ],
                [
                    [
                        g.endpoint_id + ("" if g.is_active else " (disabled)"),
                        g.url,
                        g.count,
                        f"{_error(g.top_error)} ({g.top_error_count})",
                        f"{status_words(g.top_status_code) or 'none'} "
                        f"({g.top_status_count})",
                        _time(g.first_dead_at),
                        _time(g.last_dead_at),
                        f"{g.avg_attempts:.1f}",
                    ]
                    for g in analysis
                ],
            )
        else:
            lines.append("none")
        lines += [
            "",
            "Slow endpoints (receiver response time p95 over 24 h above 2000 ms)",
        ]
        if s.slow_endpoints:
            lines += _table(
                [
                    "endpoint",
                    "url",
                    "response p50 ms",
                    "response p95 ms",
                    "response p99 ms",
                    "samples",
                    "state",
                ],
                [
                    [
                        e.endpoint_id,
                        e.url,
                        _ms(e.p50_ms),
                        _ms(e.p95_ms),
                        _ms(e.p99_ms),
                        e.sample_count,
                        STATE_WORDS.get(e.breaker_state, e.breaker_state),
                    ]
                    for e in s.slow_endpoints
                ],
            )
        else:
            lines.append("none")
        self.stdout.write("\n".join(lines))
        return summary
