"""The staff console, the portal and the ops commands at a million deliveries (issue 10).

Seeds its own PostgreSQL database with SQL (INSERT ... SELECT generate_series,
about a minute): 50 endpoints of one merchant with skewed traffic, 1 M events
and deliveries over 30 days (90 % succeeded, 5 % dead, the newest 5 % pending
and 1 % of those due now), 1.5 M
attempts, an open breaker holding a backlog. Then times every admin page,
every portal page, `relay_status`, `refresh_endpoint_stats` and /metrics,
in process through Django's test client (no HTTP server: the figures are the
view and its queries), median of --runs.

    .venv/bin/python bench/scale.py                      # seed if needed, time all
    .venv/bin/python bench/scale.py --reseed --rows 10000
    .venv/bin/python bench/scale.py --only admin

SCALE_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/relay_scale)
names the database; it is created when missing and reseeded when its row
count differs from --rows. Results: a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from io import StringIO
from pathlib import Path

from relayproject.lib.clock import utcnow

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/relay_scale"
ENDPOINTS = 50
TYPES = ("order.created", "order.paid", "payment.captured", "refund.created", "user.x")


def configure(database_url: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="relayproject.settings",
        DATABASE_URL=database_url,
        SECRET_KEY="bench-scale-only-not-a-real-secret-0123456789abcdef",
        DEBUG="false",
        ALLOWED_HOSTS="testserver",
        RELAY_ALLOW_PRIVATE_DESTINATIONS="true",
        LOG_LEVEL="WARNING",
        # A fixed Fernet key (32 bytes, base64): the bench database only.
        RELAY_ENCRYPTION_KEYS="YmVuY2gtc2NhbGUta2V5LTAxMjM0NTY3ODlhYmNkZWY=",
    )
    import django

    django.setup()


def ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin_url = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


# Ids have the shape of relayproject.lib.ids: the prefix, 10 base32 characters of
# the creation time in ms (so they sort by time and land in their day's
# partition), then 16 more (here the row number, so they are unique).
def _b32(value: str, length: int) -> str:
    """SQL for the base32 characters of relayproject.lib.ids: one expression per row."""
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    return " || ".join(
        f"substr('{alphabet}', (({value} >> {5 * (length - 1 - k)}) & 31)::int + 1, 1)"
        for k in range(length)
    )


_AT = "(%(start)s::timestamptz + (i * %(step)s) * interval '1 second')"
_MS = f"(extract(epoch FROM {_AT}) * 1000)::bigint"


def _id(prefix: str) -> str:
    return f"'{prefix}_' || {_b32(_MS, 10)} || '000000' || {_b32('i', 10)}"


SEED_SQL = """
SELECT setseed(0.42);
INSERT INTO deliveries_event (id, merchant_id, type, data, created_at,
    idempotency_scope, idempotency_key, request_fingerprint, traceparent)
SELECT EVT_ID, %(merchant)s,
       (%(types)s::text[])[1 + i %% 5],
       jsonb_build_object('order', i, 'amount', i %% 1000, 'currency', 'EUR'),
       %(start)s::timestamptz + (i * %(step)s) * interval '1 second', '', NULL, '', ''
FROM generate_series(1, %(rows)s) AS i;

-- Skewed traffic: endpoint k gets about twice the share of endpoint k + 6.
CREATE TEMP TABLE seed_plan AS
SELECT i,
       DLV_ID AS id, EVT_ID AS event_id,
       (%(endpoints)s::text[])[1 + least(49, floor(-ln(1 - random()) * 9))::int] AS endpoint_id,
       -- The backlog is the newest 5 %% (pending rows are recent in a live
       -- system); about 5 %% of the rest died.
       CASE WHEN i > %(rows)s * 0.95 THEN 'pending' WHEN i %% 19 = 0 THEN 'dead'
            ELSE 'succeeded' END AS status,
       %(start)s::timestamptz + (i * %(step)s) * interval '1 second' AS created_at,
       20 + (random() * random() * 3000) AS ms
FROM generate_series(1, %(rows)s) AS i;

INSERT INTO deliveries_delivery (merchant_id, id, event_id, endpoint_id, status, attempt_count,
    budget_start, next_attempt_at, claimed_by, claimed_until, last_attempt_at,
    last_status_code, last_error, last_response_ms, created_at, succeeded_at, dead_at)
SELECT (SELECT e.merchant_id FROM endpoints_endpoint e WHERE e.id = endpoint_id),
       id, event_id, endpoint_id, status, 1 + i %% 2, 0,
       -- 1 %% of the backlog is due now, the rest waits for a retry.
       CASE WHEN status <> 'pending' THEN created_at
            WHEN i %% 100 = 0 THEN now() - interval '1 second'
            ELSE now() + interval '1 hour' + random() * interval '1 hour' END,
       '', NULL, created_at + interval '1 second',
       CASE WHEN status = 'succeeded' THEN 200 ELSE 500 END,
       CASE WHEN status = 'succeeded' THEN '' ELSE 'HTTP 500' END,
       ms, created_at,
       CASE WHEN status = 'succeeded' THEN created_at + interval '2 seconds' END,
       CASE WHEN status = 'dead' THEN created_at + interval '1 hour' END
FROM seed_plan;

INSERT INTO deliveries_attempt (merchant_id, delivery_id, endpoint_id, number, started_at,
    response_ms, status_code, error_kind, error_message, response_body, worker_id,
    outcome)
SELECT (SELECT e.merchant_id FROM endpoints_endpoint e WHERE e.id = endpoint_id),
       id, endpoint_id, n,
       created_at + n * interval '1 second', ms,
       CASE WHEN n = 1 + i %% 2 AND status = 'succeeded' THEN 200 ELSE 500 END,
       '', CASE WHEN n = 1 + i %% 2 AND status = 'succeeded' THEN '' ELSE 'HTTP 500' END,
       'ok', 'seed',
       CASE WHEN n < 1 + i %% 2 OR status = 'pending' THEN 'retry' ELSE status END
FROM seed_plan, generate_series(1, 1 + i %% 2) AS n;
""".replace("DLV_ID", _id("dlv")).replace("EVT_ID", _id("evt"))


def seed(rows: int) -> float:
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from deliveries.history.partitions import partitions_ensure
    from endpoints.apikeys import apikey_create
    from endpoints.models import ApiKey, EndpointHealth, Membership, Merchant
    from endpoints.probes import endpoint_breaker_open
    from endpoints.services import endpoint_create

    started = time.perf_counter()
    call_command("flush", interactive=False, verbosity=0)
    merchant = Merchant.objects.create(slug="scale", name="Scale Ltd")
    owner = User.objects.create_user("owner", password="bench-only-password")
    Membership.objects.create(user=owner, merchant=merchant, role="owner")
    User.objects.create_superuser("staff", "s@example.com", "bench-only-password")
    endpoints = [
        endpoint_create(
            merchant=merchant,
            url=f"http://127.0.0.1:9/hooks/{n}",
            event_types=[],
            now=utcnow(),
        ).pk
        for n in range(ENDPOINTS)
    ]
    for n in range(5):
        apikey_create(name=f"service-{n}", merchant=merchant if n % 2 else None)
    now = datetime.now(UTC)
    start = now - timedelta(days=30)
    # A partition per day of the history, as a month of running would have made.
    partitions_ensure(first=start.date(), last=now.date() + timedelta(days=1))
    step = 30 * 86400 / rows
    with connection.cursor() as cursor:
        cursor.execute(
            SEED_SQL,
            {
                "merchant": merchant.pk,
                "types": list(TYPES),
                "endpoints": endpoints,
                "start": start,
                "step": step,
                "rows": rows,
            },
        )
    # One endpoint's breaker is open over its pending backlog.
    endpoint_breaker_open(endpoint_id=endpoints[3], reason="bench: open", now=now)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # autocommit: fresh statistics and visibility
    call_command("refresh_endpoint_stats", stdout=StringIO())
    assert EndpointHealth.objects.count() == ENDPOINTS
    assert ApiKey.objects.count() == 5
    return time.perf_counter() - started


def seeded_rows() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM deliveries_delivery")
        return cursor.fetchone()[0]


def measure(fn, runs: int) -> list[float]:
    fn()  # warm: templates, connection, caches of the planner
    timings = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        timings.append((time.perf_counter() - t0) * 1000)
    return timings


def targets() -> list[tuple[str, str, object]]:
    """(group, name, callable) for everything the issue names."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db.models import Count
    from django.test import Client
    from django.urls import reverse

    from deliveries.models import Delivery, Event
    from endpoints.models import Endpoint

    staff, owner = Client(), Client()
    staff.force_login(User.objects.get(username="staff"))
    owner.force_login(User.objects.get(username="owner"))
    busiest = (
        Delivery.objects.values("endpoint_id")
        .annotate(n=Count("pk"))
        .order_by("-n")
        .first()["endpoint_id"]
    )
    quiet = Endpoint.objects.order_by("-pk").first().pk
    dead = Delivery.objects.filter(status="dead").order_by("-pk").first()
    pending = Delivery.objects.filter(status="pending", endpoint_id=busiest).first()
    event = Event.objects.order_by("-pk").first()

    def get(client, url):
        def go():
            response = client.get(url, secure=True)
            assert response.status_code == 200, (url, response.status_code)

        return go

    def admin(name, *args, query=""):
        return get(staff, reverse(f"admin:{name}", args=args) + query)

    def portal(name, **kwargs):
        return get(owner, reverse(f"portal:{name}", kwargs={"slug": "scale", **kwargs}))

    def command(*args):
        return lambda: call_command(*args, stdout=StringIO())

    dl = "deliveries_delivery"
    return [
        ("admin", "index", admin("index")),
        ("admin", "pipeline health", admin("deliveries_pipeline")),
        ("admin", "deliveries", admin(f"{dl}_changelist")),
        ("admin", "deliveries ?status=dead", admin(f"{dl}_changelist", query="?status__exact=dead")),
        ("admin", "deliveries ?status=pending", admin(f"{dl}_changelist", query="?status__exact=pending")),
        ("admin", "deliveries of the busiest endpoint", admin(f"{dl}_changelist", query=f"?endpoint__id__exact={busiest}")),
        ("admin", "deliveries of a quiet endpoint", admin(f"{dl}_changelist", query=f"?endpoint__id__exact={quiet}")),
        ("admin", "deliveries, search by event id", admin(f"{dl}_changelist", query=f"?q={event.pk}")),
        ("admin", "deliveries, page 200", admin(f"{dl}_changelist", query="?p=200")),
        ("admin", "delivery page (pending)", admin(f"{dl}_change", pending.pk)),
        ("admin", "dead letters (24 h analysis)", admin("deliveries_deadletter_changelist")),
        ("admin", "dead letters (7 d analysis)", admin("deliveries_deadletter_changelist", query="?window=7d")),
        ("admin", "dead letter page", admin("deliveries_deadletter_change", dead.pk)),
        ("admin", "replay all dead: confirm", admin("deliveries_deadletter_replay_endpoint", busiest)),
        ("admin", "events", admin("deliveries_event_changelist")),
        ("admin", "event page", admin("deliveries_event_change", event.pk)),
        ("admin", "endpoints", admin("endpoints_endpoint_changelist")),
        ("admin", "endpoint page", admin("endpoints_endpoint_change", busiest)),
        ("admin", "endpoint health", admin("endpoints_endpointhealth_changelist")),
        ("admin", "endpoint health page", admin("endpoints_endpointhealth_change", busiest)),
        ("admin", "API keys", admin("endpoints_apikey_changelist")),
        ("admin", "merchants", admin("endpoints_merchant_changelist")),
        ("portal", "endpoints", portal("endpoint_list")),
        ("portal", "endpoint (busiest)", portal("endpoint_detail", endpoint_id=busiest)),
        ("portal", "endpoint edit form", portal("endpoint_edit", endpoint_id=busiest)),
        ("portal", "new endpoint form", portal("endpoint_create")),
        ("portal", "endpoint health (busiest)", portal("endpoint_health", endpoint_id=busiest)),
        ("portal", "deliveries", portal("delivery_list")),
        ("portal", "deliveries of the busiest endpoint", portal("endpoint_deliveries", endpoint_id=busiest)),
        ("portal", "delivery page", portal("delivery_detail", delivery_id=dead.pk)),
        ("portal", "recover (count dead)", portal("endpoint_recover", endpoint_id=busiest)),
        ("ops", "relay_status", command("relay_status")),
        ("ops", "relay_status --json", command("relay_status", "--json")),
        ("ops", "refresh_endpoint_stats", command("refresh_endpoint_stats")),
        ("ops", "/metrics", get(Client(), "/metrics")),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--only", choices=["admin", "portal", "ops"])
    parser.add_argument("--seed-only", action="store_true")
    args = parser.parse_args()
    database_url = os.environ.get("SCALE_DATABASE_URL", DEFAULT_DB)
    ensure_database(database_url)
    configure(database_url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if args.reseed or seeded_rows() != args.rows:
        print(f"seeding {args.rows:,} deliveries ...", file=sys.stderr)
        print(f"seeded in {seed(args.rows):.0f} s", file=sys.stderr)
    if args.seed_only:
        return
    print(f"| what | median ms | min | max |  ({args.rows:,} deliveries)")
    print("|---|---:|---:|---:|")
    for group, name, fn in targets():
        if args.only and group != args.only:
            continue
        t = measure(fn, args.runs)
        flag = " **over 300**" if statistics.median(t) > 300 else ""
        print(
            f"| {group}: {name} | {statistics.median(t):.0f}{flag} | "
            f"{min(t):.0f} | {max(t):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
