"""A pull endpoint's messages over the REST API (CONTRACT section 8): pulled
with the exact body and signed headers, acked, nacked; ids that are not
this endpoint's leased messages rejected with nothing changed; and every
refusal a problem+json."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from standardwebhooks import Webhook

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.pull.leasing import messages_lease
from deliveries.services import event_publish
from deliveries.signing import serialize_body
from endpoints.models import Endpoint, EndpointHealth, Merchant
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import api_as, assert_problem, row_counts

pytestmark = pytest.mark.postgres

ITEM_FIELDS = {"id", "attempt", "headers", "body", "lease_expires_at"}


def pull_endpoint(merchant: Merchant, **fields) -> Endpoint:
    return factories.endpoint(merchant, url="", kind="pull", **fields)


def at(endpoint: Endpoint, tail: str = "") -> str:
    return f"/merchants/{endpoint.merchant.slug}/endpoints/{endpoint.pk}/messages{tail}"


def publish(merchant: Merchant, n: int = 1) -> list:
    return [
        event_publish(merchant=merchant, type="order.paid", data={"n": i})
        for i in range(n)
    ]


def pulled(api, endpoint: Endpoint, query: str = "") -> list[dict]:
    response = api.get(at(endpoint, query))
    assert response.status_code == 200, response.content
    return response.json()["items"]


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def deliveries_as_they_are() -> list[dict]:
    return list(Delivery.objects.order_by("pk").values())


def test_a_pull_hands_out_the_exact_body_and_headers_signed_with_the_secret(
    scoped, merchant
):
    endpoint = pull_endpoint(merchant)
    secret = endpoint.secrets.get().secret
    event = event_publish(
        merchant=merchant, type="order.paid", data={"name": "café ☕", "cents": 1999}
    )
    before = utcnow()

    [item] = pulled(scoped, endpoint, "?limit=5")

    assert set(item) == ITEM_FIELDS
    assert item["body"] == serialize_body(
        event_id=event.pk,
        event_type="order.paid",
        created_at=event.created_at,
        data={"name": "café ☕", "cents": 1999},
    ).decode("utf-8")
    verified = Webhook(secret).verify(item["body"].encode("utf-8"), item["headers"])
    assert verified["data"] == {"name": "café ☕", "cents": 1999}
    assert item["attempt"] == 1
    assert item["headers"]["X-Relay-Attempt"] == "1"
    assert item["headers"]["X-Relay-Delivery-Id"] == item["id"]
    assert item["headers"]["webhook-id"] == event.pk
    assert item["headers"]["Content-Type"] == "application/json"
    assert "User-Agent" not in item["headers"]  # the wire's, not the message's
    lease = moment(item["lease_expires_at"]) - before
    assert timedelta(seconds=29) < lease <= timedelta(seconds=31)
    row = Delivery.objects.get(pk=item["id"])
    assert (row.status, row.claimed_by) == (Delivery.Status.DELIVERING, "pull")
    assert EndpointHealth.objects.get(endpoint=endpoint).last_pulled_at >= before


def test_a_leased_message_is_not_handed_out_again_while_its_lease_lives(
    scoped, merchant
):
    endpoint = pull_endpoint(merchant)
    publish(merchant, 3)

    first = pulled(scoped, endpoint, "?limit=2")
    second = pulled(scoped, endpoint, "?limit=5")
    third = pulled(scoped, endpoint)

    assert len(first) == 2 and len(second) == 1 and third == []
    assert not {m["id"] for m in first} & {m["id"] for m in second}


def test_the_lease_lasts_the_endpoints_own_visibility_timeout(scoped, merchant):
    endpoint = pull_endpoint(merchant, visibility_timeout_seconds=600)
    publish(merchant)
    before = utcnow()

    [item] = pulled(scoped, endpoint)

    lease = moment(item["lease_expires_at"]) - before
    assert timedelta(seconds=599) < lease <= timedelta(seconds=601)


def test_an_ack_marks_it_succeeded_once(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    [item] = pulled(scoped, endpoint)

    acked = scoped.post(at(endpoint, "/ack"), {"ids": [item["id"]]})
    again = scoped.post(at(endpoint, "/ack"), {"ids": [item["id"]]})

    assert acked.json() == {"acked": [item["id"]], "rejected": []}
    assert again.json() == {"acked": [], "rejected": [item["id"]]}
    row = Delivery.objects.get(pk=item["id"])
    assert (row.status, row.attempt_count) == (Delivery.Status.SUCCEEDED, 1)
    [attempt] = Attempt.objects.filter(delivery_id=item["id"])
    assert (attempt.outcome, attempt.worker_id) == ("succeeded", "pull")


def test_a_nack_with_retry_after_makes_it_due_then(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    [item] = pulled(scoped, endpoint)
    before = utcnow()

    answer = scoped.post(
        at(endpoint, "/nack"), {"ids": [item["id"]], "retry_after_seconds": 60}
    )

    assert answer.json() == {"nacked": [item["id"]], "rejected": []}
    row = Delivery.objects.get(pk=item["id"])
    assert (row.status, row.attempt_count, row.last_error) == (
        Delivery.Status.PENDING,
        1,
        ErrorKind.NACKED,
    )
    wait = row.next_attempt_at - before
    assert timedelta(seconds=59) < wait <= timedelta(seconds=61)
    assert pulled(scoped, endpoint) == []  # not due yet


def test_a_nack_with_no_wait_hands_it_out_again_as_the_next_attempt(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    [item] = pulled(scoped, endpoint)

    scoped.post(at(endpoint, "/nack"), {"ids": [item["id"]], "retry_after_seconds": 0})
    [again] = pulled(scoped, endpoint)

    assert (again["id"], again["attempt"]) == (item["id"], 2)
    assert again["headers"]["X-Relay-Attempt"] == "2"


def test_a_nack_of_the_last_attempt_makes_it_dead(scoped, merchant):
    endpoint = pull_endpoint(merchant, max_attempts=1)
    publish(merchant)
    [item] = pulled(scoped, endpoint)

    answer = scoped.post(at(endpoint, "/nack"), {"ids": [item["id"]]})

    assert answer.json() == {"nacked": [item["id"]], "rejected": []}
    row = Delivery.objects.get(pk=item["id"])
    assert (row.status, row.last_error) == (Delivery.Status.DEAD, ErrorKind.NACKED)


def test_a_wait_past_the_relays_longest_is_a_422(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    [item] = pulled(scoped, endpoint)
    before = deliveries_as_they_are()
    too_long = settings.RETRY_MAX_DELAY_SECONDS + 1

    response = scoped.post(
        at(endpoint, "/nack"), {"ids": [item["id"]], "retry_after_seconds": too_long}
    )

    body = assert_problem(response, 422, ["body", "retry_after_seconds"])
    assert "RETRY_MAX_DELAY_SECONDS" in body["detail"]
    assert deliveries_as_they_are() == before


@pytest.mark.parametrize("route", ["/ack", "/nack"])
def test_ids_not_this_endpoints_leased_messages_are_rejected_and_change_nothing(
    platform, merchant, other_merchant, route
):
    mine = pull_endpoint(merchant)
    sibling = pull_endpoint(merchant)
    elsewhere = pull_endpoint(other_merchant)
    publish(merchant)
    publish(other_merchant)
    now = utcnow()
    [of_sibling] = messages_lease(endpoint=sibling, limit=5, now=now)
    [of_elsewhere] = messages_lease(endpoint=elsewhere, limit=5, now=now)
    [never_leased] = Delivery.objects.filter(endpoint=mine).values_list("pk", flat=True)
    asked = [of_sibling.id, of_elsewhere.id, never_leased, "dl_no_such_delivery"]
    before = (row_counts(), deliveries_as_they_are())

    answer = platform.post(at(mine, route), {"ids": asked})

    done = "acked" if route == "/ack" else "nacked"
    assert answer.json() == {done: [], "rejected": asked}
    assert (row_counts(), deliveries_as_they_are()) == before


@pytest.mark.parametrize("route", ["/ack", "/nack"])
def test_an_id_whose_lease_ran_out_is_rejected_and_changes_nothing(
    scoped, merchant, route
):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    [item] = pulled(scoped, endpoint)
    lapsed = utcnow() - timedelta(seconds=1)  # as if the visibility timeout passed
    Delivery.objects.filter(pk=item["id"]).update(
        claimed_until=lapsed, next_attempt_at=lapsed
    )
    before = (row_counts(), deliveries_as_they_are())

    answer = scoped.post(at(endpoint, route), {"ids": [item["id"]]})

    assert answer.json()["rejected"] == [item["id"]]
    assert (row_counts(), deliveries_as_they_are()) == before


def test_a_lease_that_ran_out_is_a_spent_attempt_at_the_next_pull(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    [item] = pulled(scoped, endpoint)
    lapsed = utcnow() - timedelta(seconds=1)
    Delivery.objects.filter(pk=item["id"]).update(
        claimed_until=lapsed, next_attempt_at=lapsed
    )

    [again] = pulled(scoped, endpoint)

    assert (again["id"], again["attempt"]) == (item["id"], 2)
    [lost] = Attempt.objects.filter(delivery_id=item["id"])
    assert (lost.number, lost.error_kind, lost.outcome) == (
        1,
        ErrorKind.LEASE_EXPIRED,
        "retry",
    )
    assert Delivery.objects.get(pk=item["id"]).attempt_count == 1


def test_limit_defaults_to_ten_and_takes_up_to_a_hundred(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant, 11)

    assert len(pulled(scoped, endpoint)) == 10
    assert len(pulled(scoped, endpoint, "?limit=100")) == 1


@pytest.mark.parametrize("query", ["?limit=0", "?limit=101", "?limit=many"])
def test_a_limit_out_of_bounds_is_a_422_and_leases_nothing(scoped, merchant, query):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    before = deliveries_as_they_are()

    assert_problem(scoped.get(at(endpoint, query)), 422, ["query", "limit"])
    assert deliveries_as_they_are() == before


def test_an_unknown_query_parameter_is_a_422(scoped, merchant):
    endpoint = pull_endpoint(merchant)

    assert_problem(scoped.get(at(endpoint, "?wait=5")), 422, ["query", "wait"])


@pytest.mark.parametrize(
    "ids", [[], [f"dl_{n}" for n in range(101)], [17], "dl_1", None]
)
@pytest.mark.parametrize("route", ["/ack", "/nack"])
def test_ids_must_be_one_to_a_hundred_strings(scoped, merchant, route, ids):
    endpoint = pull_endpoint(merchant)

    response = scoped.post(at(endpoint, route), {"ids": ids})

    body = assert_problem(response, 422)
    assert all(e["loc"][:2] == ["body", "ids"] for e in body["errors"])


@pytest.mark.parametrize(
    ("method", "tail", "body"),
    [
        ("GET", "", None),
        ("POST", "/ack", {"ids": ["x"]}),
        ("POST", "/nack", {"ids": ["x"]}),
    ],
)
def test_an_endpoint_of_another_kind_is_a_409_saying_so(
    scoped, merchant, method, tail, body
):
    endpoint = factories.endpoint(merchant)
    publish(merchant)
    before = (row_counts(), deliveries_as_they_are())

    response = scoped.call(method, at(endpoint, tail), body)

    problem = assert_problem(response, 409)
    assert "is not a pull endpoint (its kind is http)" in problem["detail"]
    assert (row_counts(), deliveries_as_they_are()) == before


@pytest.mark.parametrize(
    ("method", "tail"), [("GET", ""), ("POST", "/ack"), ("POST", "/nack")]
)
def test_a_scoped_key_cannot_pull_or_answer_another_merchants_messages(
    scoped, other_merchant, method, tail
):
    endpoint = pull_endpoint(other_merchant)
    publish(other_merchant)
    [leased] = messages_lease(endpoint=endpoint, limit=5, now=utcnow())
    before = (row_counts(), deliveries_as_they_are())
    health = EndpointHealth.objects.values().get(endpoint=endpoint)

    response = scoped.call(method, at(endpoint, tail), {"ids": [leased.id]})

    assert_problem(response, 404)
    assert (row_counts(), deliveries_as_they_are()) == before
    assert EndpointHealth.objects.values().get(endpoint=endpoint) == health


def test_a_disabled_endpoints_messages_wait(scoped, merchant):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    scoped.patch(f"/merchants/acme/endpoints/{endpoint.pk}", {"is_active": False})

    assert pulled(scoped, endpoint) == []
    assert Delivery.objects.get(endpoint=endpoint).status == Delivery.Status.PENDING


def test_a_switched_off_merchants_messages_wait_even_for_a_platform_key(
    platform, merchant
):
    endpoint = pull_endpoint(merchant)
    publish(merchant)
    Merchant.objects.filter(pk=merchant.pk).update(is_active=False)

    assert pulled(platform, endpoint) == []
    assert Delivery.objects.get(endpoint=endpoint).status == Delivery.Status.PENDING
    acked = platform.post(at(endpoint, "/ack"), {"ids": ["x"]})
    assert "switched off" in assert_problem(acked, 403)["detail"]


def test_another_merchants_own_key_pulls_its_own(merchant, other_merchant):
    endpoint = pull_endpoint(other_merchant)
    publish(other_merchant)

    assert len(pulled(api_as(other_merchant), endpoint)) == 1
