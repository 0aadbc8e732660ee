"""Reads the merchant portal needs: delivery pages, the request as sent, 24 h health."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count, Prefetch, Q, QuerySet

from deliveries import signing
from deliveries.models import Attempt, Delivery, Event
from deliveries.ops.stats import QUANTILES, WINDOW, percentile_cont
from deliveries.request import TRANSPORT_HEADERS, outgoing_headers
from deliveries.words import error_words, pull_error_words
from endpoints import brokers
from relayproject.lib import dbfeatures
from relayproject.lib.pagination import keyset_page

PAGE_SIZE = 50
HIDDEN_VALUE = "•••• (custom header, value hidden)"
EVENT_TYPES_SHOWN = 200


def delivery_of_merchant(*, merchant_id: int, delivery_id: str) -> Delivery | None:
    return (
        Delivery.objects.select_related(
            "event", "endpoint__merchant", "endpoint__health"
        )
        .prefetch_related(
            Prefetch("attempts", queryset=Attempt.objects.order_by("number"))
        )
        .filter(pk=delivery_id, endpoint__merchant_id=merchant_id)
        .first()
    )


# A loose index scan: one index probe per distinct type on (merchant, type),
# where SELECT DISTINCT would read every event the merchant ever published.
_TYPES_SKIP_SCAN = """
WITH RECURSIVE seen(type) AS (
    (SELECT type FROM deliveries_event WHERE merchant_id = %(m)s
     ORDER BY type LIMIT 1)
    UNION ALL
    SELECT (SELECT e.type FROM deliveries_event e
            WHERE e.merchant_id = %(m)s AND e.type > seen.type
            ORDER BY e.type LIMIT 1)
    FROM seen WHERE seen.type IS NOT NULL
)
SELECT type FROM seen WHERE type IS NOT NULL LIMIT %(limit)s
"""


def event_types_seen(*, merchant_id: int) -> list[str]:
    """Event types this merchant has published, for the subscription picker."""
    if dbfeatures.loose_index_scans():
        with connection.cursor() as cursor:
            cursor.execute(
                _TYPES_SKIP_SCAN, {"m": merchant_id, "limit": EVENT_TYPES_SHOWN}
            )
            return [row[0] for row in cursor.fetchall()]
    return list(
        Event.objects.filter(merchant_id=merchant_id)
        .order_by("type")
        .values_list("type", flat=True)
        .distinct()[:EVENT_TYPES_SHOWN]
    )


def events_recent(*, merchant_id: int, limit: int = 20) -> list[Event]:
    """The merchant's newest events, for trying a payload filter on."""
    return list(
        Event.objects.filter(merchant_id=merchant_id)
        .only("id", "type", "data", "created_at")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass(frozen=True)
class Page:
    items: list[Delivery]
    next_cursor: str | None  # older rows continue after this id
    newer_cursor: str | None = None  # newer rows come before this id


def deliveries_filtered(
    *,
    merchant_id: int,
    endpoint_id: str | None = None,
    status: str | None = None,
    event_type: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    search: str | None = None,
) -> QuerySet[Delivery]:
    """The portal log's rows; "order.*" matches every type under "order."."""
    # Events come in one query for the page: joined, the day-partitioned
    # events made planning cost more than running (see deliveries.admin.model_admins).
    rows: QuerySet[Delivery] = (
        Delivery.objects.select_related("endpoint__merchant", "endpoint__health")
        .prefetch_related("event")
        .filter(endpoint__merchant_id=merchant_id)
    )
    if endpoint_id:
        rows = rows.filter(endpoint_id=endpoint_id)
    if status:
        rows = rows.filter(status=status)
    elif since or until:
        # Every status, named: a window is then read from (endpoint, status,
        # created_at), a range per status. Left open, PostgreSQL read the
        # endpoint's rows newest first by id, or the window's rows of every
        # endpoint, and threw away the rest (13,401 or 1,200 rows for a page
        # of 51 at 60,000 rows: tests/deliveries/test_delivery_indexes.py).
        rows = rows.filter(status__in=Delivery.Status.values)
    if event_type and event_type.endswith(".*"):
        rows = rows.filter(event__type__startswith=event_type[:-1])
    elif event_type:
        rows = rows.filter(event__type=event_type)
    if since:
        rows = rows.filter(created_at__gte=since)
    if until:
        rows = rows.filter(created_at__lt=until)
    if search:
        rows = rows.filter(Q(pk=search) | Q(event_id=search))
    return rows


def deliveries_page(
    *,
    merchant_id: int,
    cursor: str | None = None,
    before: str | None = None,
    size: int | None = None,
    **filters,
) -> Page:
    """Newest first; ids are time-ordered, so the last id seen is the cursor.

    `before` walks back towards newer rows (the "Newer" link).
    """
    size = size or PAGE_SIZE
    rows = deliveries_filtered(merchant_id=merchant_id, **filters)
    if before:
        newer = list(rows.filter(pk__gt=before).order_by("pk")[: size + 1])
        more_newer = len(newer) > size
        items = list(reversed(newer[:size]))
        return Page(
            items=items,
            next_cursor=items[-1].pk if items else None,
            newer_cursor=items[0].pk if items and more_newer else None,
        )
    items, next_cursor = keyset_page(rows, after_id=cursor, limit=size)
    newer_cursor = None
    if cursor and items and rows.filter(pk__gt=items[0].pk).exists():
        newer_cursor = items[0].pk
    return Page(items=items, next_cursor=next_cursor, newer_cursor=newer_cursor)


@dataclass(frozen=True)
class SentRequest:
    url: str
    headers: list[tuple[str, str]]
    body: bytes
    # "recorded": the attempt's own record; "unrecorded": an attempt made
    # before requests were kept (headers unknown); "next": nothing sent yet;
    # "pulled": a pull endpoint's message, as each pull hands it out.
    source: str
    number: int


def delivery_request(*, delivery: Delivery) -> SentRequest:
    """The request of the last attempt as that attempt recorded it, or the
    next one's as it will be sent when there is no attempt yet.

    Never rebuilt from the endpoint's current URL or secrets for an attempt
    that was made: those may have changed since. The body is the event's,
    serialised as the dispatcher signs and sends it (the same bytes every time).
    """
    event = delivery.event
    body = signing.serialize_body(
        event_id=event.pk,
        event_type=event.type,
        created_at=event.created_at,
        data=event.data,
    )
    attempts = list(delivery.attempts.all())
    if delivery.endpoint.kind == brokers.PULL:
        return _pulled_message(delivery, body)
    last = attempts[-1] if attempts else None
    if last is not None:
        if last.request_url is None:
            return SentRequest("", [], body, "unrecorded", last.number)
        headers = [(name, value) for name, value in last.request_headers or []]
        return SentRequest(last.request_url, headers, body, "recorded", last.number)
    number = delivery.attempt_count + 1
    headers = outgoing_headers(
        # Custom header values may be credentials: named here, never shown.
        custom={name: HIDDEN_VALUE for name in delivery.endpoint.headers or {}},
        event_id=event.pk,
        delivery_id=delivery.pk,
        attempt=number,
        timestamp="(set when it is sent)",
        signature="(v1,… one per live secret, at send time)",
    )
    return SentRequest(
        delivery.endpoint.url, list(headers.items()), body, "next", number
    )


def _pulled_message(delivery: Delivery, body: bytes) -> SentRequest:
    """A pull endpoint's message as its next pull hands it out. Nothing is
    recorded of a pull: each signs it anew (deliveries/pull/rendering.py),
    with no custom header and no transport header."""
    finished = delivery.status in Delivery.Status.FINISHED
    number = max(delivery.attempt_count, 1) if finished else delivery.attempt_count + 1
    headers = outgoing_headers(
        custom={},
        event_id=delivery.event_id,
        delivery_id=delivery.pk,
        attempt=number,
        timestamp="(set at each pull)",
        signature="(v1,… one per live secret, at each pull)",
    )
    for name in TRANSPORT_HEADERS:
        headers.pop(name, None)
    return SentRequest("", list(headers.items()), body, "pulled", number)


@dataclass(frozen=True)
class HourBucket:
    start: datetime
    attempts: int
    failures: int


@dataclass(frozen=True)
class EndpointWindow:
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    samples: int
    success_rate: float | None
    hours: list[HourBucket]


# One scan of the endpoint's day of attempts: a row per hour and the total
# (GROUPING SETS), percentiles over the attempts that have a duration.
_WINDOW_SQL = """
SELECT least(greatest(floor(extract(epoch FROM started_at - %(first_hour)s) / 3600),
                      0), 23)::int AS hour,
       count(*),
       count(*) FILTER (WHERE outcome <> 'succeeded'),
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY response_ms),
       count(response_ms),
       count(response_ms) FILTER (WHERE outcome = 'succeeded')
FROM deliveries_attempt
WHERE endpoint_id = %(endpoint_id)s AND started_at >= %(since)s
GROUP BY GROUPING SETS ((1), ())
"""


def endpoint_window(*, endpoint_id: str, now: datetime) -> EndpointWindow:
    """Percentiles, success rate and hourly counts over the last 24 h, one query."""
    since = now - WINDOW
    first_hour = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    if dbfeatures.percentiles_in_sql():
        counts, quantiles, samples, successes = _window_postgres(
            endpoint_id, since=since, first_hour=first_hour
        )
    else:
        counts, quantiles, samples, successes = _window_python(
            endpoint_id, since=since, first_hour=first_hour
        )
    p50, p95, p99 = quantiles if samples else (None, None, None)
    return EndpointWindow(
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        samples=samples,
        success_rate=successes / samples if samples else None,
        hours=[
            HourBucket(first_hour + timedelta(hours=i), a, f)
            for i, (a, f) in enumerate(counts)
        ],
    )


def _window_postgres(endpoint_id: str, *, since: datetime, first_hour: datetime):
    counts = [[0, 0] for _ in range(24)]
    quantiles, samples, successes = (None, None, None), 0, 0
    with connection.cursor() as cursor:
        cursor.execute(
            _WINDOW_SQL,
            {"endpoint_id": endpoint_id, "since": since, "first_hour": first_hour},
        )
        for hour, attempts, failures, q, with_ms, ok_with_ms in cursor.fetchall():
            if hour is None:  # the total row
                quantiles = tuple(q) if q else quantiles
                samples, successes = with_ms, ok_with_ms
            else:
                counts[hour] = [attempts, failures]
    return counts, quantiles, samples, successes


def _window_python(endpoint_id: str, *, since: datetime, first_hour: datetime):
    rows = (
        Attempt.objects.filter(endpoint_id=endpoint_id, started_at__gte=since)
        .order_by()  # no sort needed: the rows are bucketed, then sorted by ms
        .values_list("started_at", "response_ms", "outcome")
    )
    counts = [[0, 0] for _ in range(24)]
    latencies: list[float] = []
    successes = 0
    for started_at, ms, outcome in rows.iterator(chunk_size=5000):
        index = min(max(int((started_at - first_hour).total_seconds() // 3600), 0), 23)
        counts[index][0] += 1
        ok = outcome == Attempt.Outcome.SUCCEEDED
        counts[index][1] += not ok
        if ms is not None:
            latencies.append(ms)
            successes += ok
    latencies.sort()
    quantiles = (
        tuple(percentile_cont(latencies, q) for q in QUANTILES)
        if latencies
        else (None, None, None)
    )
    return counts, quantiles, len(latencies), successes


@dataclass(frozen=True)
class ErrorCount:
    error_kind: str
    status_code: int | None
    count: int
    words: str


def endpoint_errors(
    *, endpoint_id: str, now: datetime, limit: int = 10, pulled: bool = False
) -> list[ErrorCount]:
    """The endpoint's failed attempts over 24 h, by error kind and status, most
    first; pulled: a pull endpoint's, in its consumer's words."""
    rows = (
        Attempt.objects.filter(endpoint_id=endpoint_id, started_at__gte=now - WINDOW)
        .exclude(outcome=Attempt.Outcome.SUCCEEDED)
        .values_list("error_kind", "status_code")
        .annotate(n=Count("pk"))
        .order_by("-n", "error_kind", "status_code")[:limit]
    )
    return [
        ErrorCount(
            kind,
            status,
            n,
            (
                pull_error_words(error_kind=kind, status_code=status)
                if pulled
                else error_words(error_kind=kind, error_message="", status_code=status)
            )
            or kind,
        )
        for kind, status, n in rows
    ]
