"""Load claimed deliveries into Jobs: everything a send needs, read once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection

from deliveries import signing
from deliveries.dispatch import backend, credentials, load_sql, prepared
from deliveries.dispatch.credentials import EndpointCredentials
from deliveries.models import Delivery
from deliveries.verification import body_data, challenges_of
from endpoints.selectors import live_secrets
from relayproject.lib import citus


@dataclass(frozen=True)
class Job:
    delivery_id: str
    event_id: str
    endpoint_id: str
    url: str
    body: bytes
    secrets: list[str]
    attempt_count: int
    budget_start: int
    max_attempts: int
    rate_limit_per_second: float | None
    max_in_flight: int  # the endpoint's, or ENDPOINT_MAX_IN_FLIGHT
    is_probe: bool
    lease_until: datetime  # the claim's lease: the fence its outcome must match
    # The endpoint's custom headers; the relay's own headers are set over them.
    headers: Mapping[str, str] = field(default_factory=dict)
    # For traces, logs and latency (relayproject/lib/tracing.py, relayproject/lib/logs.py).
    merchant_id: int | None = None
    published_at: datetime | None = None  # the event's created_at
    traceparent: str = ""  # the relay.publish span to link the send span to
    is_reclaim: bool = False  # taken over from a dispatcher whose lease ran out
    # Statuses that end the delivery at once: the endpoint's permanent_statuses
    # and PERMANENT_FAILURE_STATUSES (deliveries.retry.classify).
    permanent_statuses: frozenset[int] = frozenset()
    # The verification challenge this job's body carries (deliveries/
    # verification.py); the recorder checks the answer echoes it.
    challenge: str = field(default="", repr=False)
    # Its ordered lane ("" unordered): its last outcome promotes the next row.
    ordering_key: str = ""
    # A broker endpoint's (endpoints/brokers.py; "http" uses none of these):
    # url is then the broker's, without credentials.
    kind: str = "http"
    target: Mapping[str, object] = field(default_factory=dict)
    broker_credentials: str = field(default="", repr=False)
    # The broker hosts its merchant may reach: RELAY_BROKER_HOSTS or its own.
    broker_hosts: tuple[str, ...] = ()
    # How it is signed (endpoints/signing_keys.py), and with v1a or both the
    # endpoint's Ed25519 private key (whsk_...).
    signing: str = "v1"
    signing_key: str = field(default="", repr=False)
    # Its retry policy in force (endpoints/retry_policy.py: its own, else its
    # merchant's default): delays between attempts (None: the full-jitter
    # backoff), and the per-attempt timeout (None: the sender's own).
    retry_schedule: tuple[float, ...] | None = None
    timeout_seconds: float | None = None
    # Its client certificate and auth (deliveries/dispatch/credentials.py),
    # read once per endpoint and credentials_version, not per row.
    credentials: EndpointCredentials = field(default=credentials.NONE, repr=False)


# In the order jobs_load unpacks them.
_COLUMNS = (
    "id",
    "ordering_key",
    "attempt_count",
    "budget_start",
    "event__id",
    "event__type",
    "event__data",
    "event__created_at",
    "event__merchant_id",
    "event__traceparent",
    "endpoint__id",
    "endpoint__url",
    "endpoint__max_attempts",
    "endpoint__rate_limit_per_second",
    "endpoint__headers",
    "endpoint__max_in_flight",
    "endpoint__permanent_statuses",
    "endpoint__kind",
    "endpoint__target",
    "endpoint__broker_credentials",
    "endpoint__signing",
    "endpoint__signing_private_key",
    "endpoint__retry_schedule",
    "endpoint__timeout_seconds",
    "endpoint__credentials_version",
    # Its merchant's defaults, read in the same statement.
    "endpoint__merchant__retry_schedule",
    "endpoint__merchant__max_attempts",
    "endpoint__merchant__timeout_seconds",
    "endpoint__merchant__broker_hosts",
)
_EVENT = _COLUMNS.index("event__id")
_ENDPOINT = _COLUMNS.index("endpoint__id")
_MERCHANT = _COLUMNS.index("event__merchant_id")
_VERSION = _COLUMNS.index("endpoint__credentials_version")


def jobs_load(
    *,
    delivery_ids: list[str],
    lease_until: datetime,
    probe_ids: set[str],
    now: datetime,
    reclaimed_ids: set[str] = frozenset(),
    verification_ids: set[str] = frozenset(),
    merchants: Mapping[str, int] | None = None,
    loaded: tuple[list, dict[str, list[str]]] = ((), {}),
) -> list[Job]:
    """The jobs of claimed deliveries. `loaded`: the rows and secrets the
    claim read already (Claim.job_rows, Claim.secrets: a batch claim's, on
    plain PostgreSQL); the deliveries not among them are read here, in two
    queries for all (deliveries with event and endpoint, then secrets), on
    Citus two per merchant (`merchants`: delivery id -> merchant, the
    claim's), each on the merchant's shard."""
    rows = [
        list(row)
        for row in loaded[0]
        if row[_EVENT] is not None and row[_ENDPOINT] is not None  # as JOB_ROWS
    ]
    _convert(rows)
    secrets = dict(loaded[1])
    known = {row[0] for row in loaded[0]}
    if rest := [pk for pk in delivery_ids if pk not in known]:
        more, more_secrets = _rows_and_secrets(
            rest, merchants=merchants, lease_until=lease_until, now=now
        )
        rows += more
        secrets |= more_secrets
    # As JOB_ROWS orders them (a claim's rows share one lease, so by id),
    # whichever statement read them.
    rows.sort(key=lambda r: r[0])
    challenges = challenges_of(set(verification_ids))
    bodies: dict[str, bytes] = {}
    permanent_everywhere = frozenset(settings.PERMANENT_FAILURE_STATUSES)
    endpoint_credentials = credentials.credentials_of(
        {row[_ENDPOINT]: row[_VERSION] for row in rows},
        merchants={row[_ENDPOINT]: row[_MERCHANT] for row in rows},
    )
    jobs = []
    for (
        delivery_id,
        ordering_key,
        attempt_count,
        budget_start,
        event_id,
        event_type,
        event_data,
        created_at,
        merchant_id,
        traceparent,
        endpoint_id,
        url,
        max_attempts,
        rate_limit,
        headers,
        max_in_flight,
        permanent_statuses,
        kind,
        target,
        broker_credentials,
        signing_scheme,
        signing_key,
        retry_schedule,
        timeout_seconds,
        _credentials_version,
        merchant_schedule,
        merchant_max_attempts,
        merchant_timeout,
        merchant_broker_hosts,
    ) in rows:
        challenge = challenges.get(delivery_id, "")
        if challenge:
            # Its own body: the challenge is in no stored row in clear.
            body = signing.serialize_body(
                event_id=event_id,
                event_type=event_type,
                created_at=created_at,
                data=body_data(event_data, challenge),
            )
        elif event_id not in bodies:
            # Serialised once: the bytes signed are exactly the bytes sent.
            bodies[event_id] = signing.serialize_body(
                event_id=event_id,
                event_type=event_type,
                created_at=created_at,
                data=event_data,
            )
        jobs.append(
            Job(
                delivery_id=delivery_id,
                event_id=event_id,
                endpoint_id=endpoint_id,
                url=url,
                body=body if challenge else bodies[event_id],
                secrets=secrets.get(endpoint_id, []),
                attempt_count=attempt_count,
                budget_start=budget_start,
                max_attempts=max_attempts
                or merchant_max_attempts
                or settings.MAX_ATTEMPTS,
                rate_limit_per_second=rate_limit,
                max_in_flight=max_in_flight or settings.ENDPOINT_MAX_IN_FLIGHT,
                is_probe=delivery_id in probe_ids,
                lease_until=lease_until,
                headers=headers or {},
                merchant_id=merchant_id,
                published_at=created_at,
                traceparent=traceparent,
                is_reclaim=delivery_id in reclaimed_ids,
                permanent_statuses=permanent_everywhere
                | frozenset(permanent_statuses or ()),
                challenge=challenge,
                ordering_key=ordering_key,
                kind=kind or "http",
                target=target or {},
                broker_credentials=broker_credentials or "",
                signing=signing_scheme or "v1",
                signing_key=signing_key or "",
                retry_schedule=_schedule(retry_schedule, merchant_schedule),
                timeout_seconds=_timeout(timeout_seconds, merchant_timeout),
                broker_hosts=_broker_hosts(kind, merchant_broker_hosts),
                credentials=endpoint_credentials.get(endpoint_id, credentials.STALE),
            )
        )
    return jobs


def _schedule(own, default) -> tuple[float, ...] | None:
    schedule = own if own is not None else default
    return tuple(float(delay) for delay in schedule) if schedule else None


def _timeout(own, default) -> float | None:
    """The attempt's timeout, never past HTTP_TIMEOUT_MAX_SECONDS (the bound
    in force now: the lease was sized by it, whatever was saved before)."""
    timeout = own if own is not None else default
    if timeout is None:
        return None
    return min(float(timeout), settings.HTTP_TIMEOUT_MAX_SECONDS)


def _broker_hosts(kind: str, own: list[str] | None) -> tuple[str, ...]:
    """The broker hosts a broker job may reach: its merchant's own list set
    by staff, or RELAY_BROKER_HOSTS; none for a kind the operator does not
    offer (the send is then refused)."""
    if kind in (None, "", "http") or kind not in settings.RELAY_BROKER_KINDS:
        return ()
    return tuple(own if own is not None else settings.RELAY_BROKER_HOSTS)


def _rows_and_secrets(
    delivery_ids: list[str],
    *,
    merchants: Mapping[str, int] | None,
    lease_until: datetime,
    now: datetime,
) -> tuple[list, dict[str, list[str]]]:
    if citus.on() and merchants:
        return _rows_per_merchant(
            delivery_ids, merchants=merchants, lease_until=lease_until, now=now
        )
    with prepared.statements():  # both texts the same whatever the batch
        rows = _rows(delivery_ids, lease_until=lease_until)
        return rows, live_secrets(endpoint_ids={r[_ENDPOINT] for r in rows}, now=now)


def _rows(delivery_ids: list[str], *, lease_until: datetime, **merchant) -> list:
    with prepared.statements():  # the same text whatever the batch
        if not merchant and backend.runs_written_sql():
            return _rows_written(delivery_ids, lease_until=lease_until)
        # Plain tuples, not model instances: building three instances per
        # row was most of this function's Python.
        return list(
            Delivery.objects.filter(
                pk__any=delivery_ids, claimed_until=lease_until, **merchant
            )
            .order_by("next_attempt_at", "id")
            .values_list(*_COLUMNS)
        )


# The columns of load_sql.JOB_ROWS whose field converts what the database
# returns (JSON text, encrypted values), as the ORM form's values_list would.
def _field_of(column: str):
    """The model field a job column reads ("endpoint__merchant__x": Merchant.x)."""
    path = column.split("__")
    model = Delivery
    for name in path[:-1]:
        model = model._meta.get_field(name).related_model
    return model._meta.get_field(path[-1])


_CONVERTED = tuple(
    (n, field.from_db_value)
    for n, field in enumerate(_field_of(c) if "__" in c else None for c in _COLUMNS)
    if field is not None and hasattr(field, "from_db_value")
)


def _rows_written(delivery_ids: list[str], *, lease_until: datetime) -> list:
    with connection.cursor() as cursor:
        cursor.execute(load_sql.JOB_ROWS, {"ids": delivery_ids, "lease": lease_until})
        rows = [list(row) for row in cursor.fetchall()]
    _convert(rows)
    return rows


def _convert(rows: list[list]) -> None:
    """Rows of load_sql's job columns, converted in place as the ORM would."""
    for n, convert in _CONVERTED:
        for row in rows:
            row[n] = convert(row[n], None, connection)


def _rows_per_merchant(
    delivery_ids: list[str],
    *,
    merchants: Mapping[str, int],
    lease_until: datetime,
    now: datetime,
) -> tuple[list, dict[str, list[str]]]:
    """Citus: each merchant's rows and secrets by statements naming it, so
    each runs on its shard. The merchant is named on every table joined: Citus
    routes a join only when each distributed table's shard is known. A row
    without a merchant is read by a statement over every shard."""
    groups: dict[int | None, list[str]] = {}
    for pk in delivery_ids:
        groups.setdefault(merchants.get(pk), []).append(pk)
    rows: list = []
    secrets: dict[str, list[str]] = {}
    for merchant_id, ids in groups.items():
        named = (
            {}
            if merchant_id is None
            else {
                "merchant_id": merchant_id,
                "event__merchant_id": merchant_id,
                "endpoint__merchant_id": merchant_id,
            }
        )
        found = _rows(ids, lease_until=lease_until, **named)
        rows += found
        secrets |= live_secrets(
            endpoint_ids={r[_ENDPOINT] for r in found},
            now=now,
            merchant_id=merchant_id,
        )
    # As one statement orders them: a claim sets every row's next_attempt_at
    # to its lease, so by id.
    rows.sort(key=lambda r: r[0])
    return rows, secrets
