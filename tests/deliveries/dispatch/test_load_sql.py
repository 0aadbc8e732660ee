"""The claim's reads written out as SQL (load_sql.py, live_secrets) answer
exactly what their ORM forms answer, converted fields and all."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from deliveries.dispatch import claiming, due, jobs
from deliveries.dispatch.attempt_insert import attempts_insert
from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import EndpointSecret
from endpoints.secret_rotation import endpoint_rotate_secret
from endpoints.selectors import live_secrets
from relayproject.lib.clock import utcnow
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def claimed(on_postgres):
    """Two merchants' endpoints (custom headers, permanent statuses, a rotated
    secret) with a claimed batch each."""
    now = utcnow()
    endpoints = []
    for n in range(2):
        merchant = factories.merchant()
        endpoint = factories.endpoint(
            merchant,
            headers={"X-Token": f"tok-{n}"},
            permanent_statuses=[409, 418],
            max_in_flight=7,
        )
        endpoint_rotate_secret(endpoint=endpoint, now=now)
        events_publish(
            merchant=merchant,
            events=[EventInput("order.paid", {"n": i, "é": "ü"}) for i in range(5)],
            now=now,
        )
        endpoints.append(endpoint)
    claim = claiming.claim_batch(
        worker_id="w", now=utcnow(), lease_seconds=60, limit=100
    )
    assert len(claim.delivery_ids) == 10
    return claim, endpoints


def test_job_rows_are_the_orm_forms_rows(claimed):
    claim, _ = claimed
    ids = claim.delivery_ids
    written = jobs._rows(ids, lease_until=claim.lease_until)
    orm = list(
        Delivery.objects.filter(pk__in=ids, claimed_until=claim.lease_until)
        .order_by("next_attempt_at", "id")
        .values_list(*jobs._COLUMNS)
    )
    assert [tuple(r) for r in written] == orm
    # The converted columns came back as Python values, not database text.
    row = dict(zip(jobs._COLUMNS, written[0], strict=True))
    assert isinstance(row["event__data"], dict)
    assert row["endpoint__headers"]["X-Token"].startswith("tok-")
    assert row["endpoint__permanent_statuses"] == [409, 418]
    # Another lease loads nothing: the fence is in the statement.
    assert jobs._rows(ids, lease_until=claim.lease_until + timedelta(seconds=1)) == []


def test_live_secrets_are_the_orm_forms_secrets(claimed):
    _, endpoints = claimed
    ids = [e.pk for e in endpoints]
    now = utcnow()
    written = live_secrets(endpoint_ids=ids, now=now)
    orm: dict[str, list[str]] = {}
    for endpoint_id, secret in (
        EndpointSecret.objects.filter(endpoint_id__in=ids)
        .exclude(expires_at__lte=now)
        .order_by("endpoint_id", "-created_at", "-id")
        .values_list("endpoint_id", "secret")
    ):
        orm.setdefault(endpoint_id, []).append(secret)
    assert written == orm
    assert all(len(secrets) == 2 for secrets in written.values())  # rotated
    assert all(s.startswith("whsec_") for v in written.values() for s in v)
    # Past the overlap, only the new secret signs.
    later = live_secrets(endpoint_ids=ids, now=now + timedelta(days=30))
    assert all(len(secrets) == 1 for secrets in later.values())


def test_live_claims_are_the_orm_forms_counts(claimed):
    _, endpoints = claimed
    merchants = [e.merchant_id for e in endpoints]
    now = utcnow()
    live = due.live_claims(merchants, now=now)
    orm = sorted(due._live_counts(merchants, now=now))
    assert (
        sorted(
            (e, m, live.endpoints[e])
            for e, m in ((x.pk, x.merchant_id) for x in endpoints)
        )
        == orm
    )
    assert live.merchants == {m: 5 for m in merchants}
    # Past the lease nothing is live.
    assert due.live_claims(merchants, now=now + timedelta(minutes=5)) == due.Live(
        {}, {}
    )


def test_an_attempt_field_left_out_is_written_with_its_default(claimed):
    claim, endpoints = claimed
    delivery = Delivery.objects.get(pk=claim.delivery_ids[0])
    attempts_insert(
        [
            {
                "delivery_id": delivery.pk,
                "endpoint_id": delivery.endpoint_id,
                "merchant_id": None,  # filled from the endpoint
                "number": 1,
                "started_at": utcnow(),
                "outcome": "retry",
                "request_headers": [["webhook-id", "evt_1"]],
            }
        ]
    )
    attempt = Attempt.objects.get(delivery_id=delivery.pk)
    assert attempt.merchant_id == delivery.merchant_id
    assert attempt.error_kind == "" and attempt.response_body == ""
    assert attempt.response_ms is None and attempt.response_headers is None
    assert attempt.request_headers == [["webhook-id", "evt_1"]]
    with connection.cursor() as cursor:  # stored as JSON, not as a quoted string
        cursor.execute(
            "SELECT jsonb_typeof(request_headers) FROM deliveries_attempt "
            "WHERE delivery_id = %s",
            [delivery.pk],
        )
        assert cursor.fetchone() == ("array",)


def test_attempt_headers_are_written_as_the_json_arrays_django_would_write(claimed):
    # Pairs come as tuples (outcomes._attempt_row); JSON has only arrays.
    claim, _ = claimed
    delivery = Delivery.objects.get(pk=claim.delivery_ids[0])
    sent = [("webhook-id", "evt_1"), ("x-token", "redacted, hmac 0a1b2c3d")]
    answered = [("Server", "caf\u00e9 \u2615"), ("X-Quote", 'say "hi" \\ bye')]
    attempts_insert(
        [
            {
                "delivery_id": delivery.pk,
                "endpoint_id": delivery.endpoint_id,
                "number": 1,
                "started_at": utcnow(),
                "outcome": "succeeded",
                "request_headers": sent,
                "response_headers": answered,
            }
        ]
    )
    attempt = Attempt.objects.get(delivery_id=delivery.pk)
    assert attempt.request_headers == [list(pair) for pair in sent]
    assert attempt.response_headers == [list(pair) for pair in answered]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT jsonb_typeof(response_headers -> 0) FROM deliveries_attempt "
            "WHERE delivery_id = %s",
            [delivery.pk],
        )
        assert cursor.fetchone() == ("array",)


def test_breakers_not_closed_and_rows_at_rest_match_the_orm_forms(claimed):
    from endpoints import health
    from endpoints.models import EndpointHealth
    from endpoints.selectors import breakers_not_closed

    _, (calm, tripped) = claimed
    probe_at = utcnow() + timedelta(minutes=1)
    EndpointHealth.objects.filter(pk=tripped.pk).update(
        breaker_state=EndpointHealth.State.OPEN,
        next_probe_at=probe_at,
        consecutive_failures=3,
    )
    ids = [calm.pk, tripped.pk]
    assert breakers_not_closed(endpoint_ids=ids) == {tripped.pk: probe_at}
    assert dict(
        EndpointHealth.objects.filter(pk__in=ids)
        .exclude(breaker_state=EndpointHealth.State.CLOSED)
        .values_list("pk", "next_probe_at")
    ) == {tripped.pk: probe_at}
    # Successes on both: only the one not at rest must be locked.
    outcomes = [
        health.Outcome(
            endpoint_id=e.pk, merchant_id=e.merchant_id, succeeded=True, is_probe=False
        )
        for e in (calm, tripped)
    ]
    assert health.rows_to_lock(outcomes) == {tripped.pk: tripped.merchant_id}


def test_a_claim_that_finds_nothing_due_is_one_statement_outside_a_transaction(
    on_postgres,
):
    from django.test.utils import CaptureQueriesContext

    factories.endpoint()  # an endpoint, nothing published
    with CaptureQueriesContext(connection) as queries:
        claim = claiming.claim_batch(
            worker_id="w", now=utcnow(), lease_seconds=60, limit=50
        )
    assert claim.delivery_ids == []
    assert len(queries) == 1, [q["sql"][:60] for q in queries]
    assert connection.get_autocommit()  # no transaction was opened, none left


def test_an_attempt_field_that_does_not_exist_is_refused_and_nothing_written(
    claimed,
):
    claim, _ = claimed
    delivery = Delivery.objects.get(pk=claim.delivery_ids[0])
    row = {
        "delivery_id": delivery.pk,
        "endpoint_id": delivery.endpoint_id,
        "merchant_id": delivery.merchant_id,
        "number": 1,
        "started_at": utcnow(),
        "outcome": "retry",
        "respnse_ms": 3.0,  # misspelt
    }
    with pytest.raises(TypeError, match="respnse_ms"):
        attempts_insert([row])
    assert not Attempt.objects.exists()
