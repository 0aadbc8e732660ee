"""Listen sessions over the REST API: started (its secret shown once),
listed while live, kept alive by pulls, ended (its messages dead, its
pulls answered 410), counted against the endpoint quota only while live,
and invisible to another merchant's key."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings

from deliveries.models import Delivery, ErrorKind
from deliveries.pull.sessions import session_end
from deliveries.services import event_publish
from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.postgres

SESSIONS = "/merchants/acme/listen-sessions"
FIELDS = {
    "id",
    "description",
    "event_types",
    "filter",
    "state",
    "created_at",
    "expires_at",
    "last_pulled_at",
    "ended_reason",
    "signing",
    "public_key",
}


def started(api, body=None) -> dict:
    response = api.post(SESSIONS, body)
    assert response.status_code == 201, response.content
    return response.json()


def messages(session_id: str) -> str:
    return f"/merchants/acme/endpoints/{session_id}/messages"


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_session_starts_live_with_its_secret_shown_once(any_key):
    before = utcnow()

    session = started(any_key, {"event_types": ["order.*"], "description": "laptop"})

    assert set(session) == FIELDS | {"secret"}
    assert session["secret"].startswith("whsec_")
    assert (session["state"], session["ended_reason"]) == ("live", "")
    assert (session["event_types"], session["description"]) == (["order.*"], "laptop")
    assert session["last_pulled_at"] is None
    idle = timedelta(seconds=settings.LISTEN_IDLE_SECONDS)
    assert before + idle <= moment(session["expires_at"]) <= utcnow() + idle
    endpoint = Endpoint.objects.get(pk=session["id"])
    assert (endpoint.kind, endpoint.listen_session) == ("pull", True)
    assert "secret" not in any_key.get(f"{SESSIONS}/{session['id']}").json()


def test_a_session_needs_no_body(platform, merchant):
    session = started(platform)

    assert (session["event_types"], session["filter"]) == ([], None)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"filter": {"data.amount": 5}}, ["body", "filter"]),
        ({"event_types": ["not a type"]}, ["body", "event_types", 0]),
        ({"description": "x" * 501}, ["body", "description"]),
    ],
)
def test_a_bad_session_is_a_422_and_starts_nothing(platform, merchant, body, loc):
    before = row_counts()

    assert_problem(platform.post(SESSIONS, body), 422, loc)
    assert row_counts() == before


def test_the_list_shows_live_sessions_newest_first(platform, merchant):
    first = started(platform)["id"]
    second = started(platform)["id"]
    ended = started(platform)["id"]
    factories.endpoint(merchant, url="", kind="pull")  # a pull endpoint, no session
    platform.delete(f"{SESSIONS}/{ended}")

    page = platform.get(SESSIONS).json()

    assert [s["id"] for s in page["items"]] == [second, first]
    assert page["next_cursor"] is None


def test_each_pull_keeps_a_session_alive(scoped, merchant):
    session = started(scoped)
    EndpointHealth.objects.filter(endpoint_id=session["id"]).update(
        session_expires_at=utcnow() + timedelta(seconds=1)
    )
    before = utcnow()

    scoped.get(messages(session["id"]))

    seen = scoped.get(f"{SESSIONS}/{session['id']}").json()
    idle = timedelta(seconds=settings.LISTEN_IDLE_SECONDS)
    assert moment(seen["expires_at"]) >= before + idle
    assert moment(seen["last_pulled_at"]) >= before


def test_ending_a_session_kills_its_messages_and_its_pulls_get_410(scoped, merchant):
    session = started(scoped)
    for n in range(2):
        event_publish(merchant=merchant, type="order.paid", data={"n": n})
    [leased] = scoped.get(messages(session["id"]) + "?limit=1").json()["items"]

    assert scoped.delete(f"{SESSIONS}/{session['id']}").status_code == 204

    seen = scoped.get(f"{SESSIONS}/{session['id']}").json()
    assert seen["state"] == "ended"
    assert seen["ended_reason"] == "listen session ended over the API"
    rows = Delivery.objects.filter(endpoint_id=session["id"])
    assert {(r.status, r.last_error) for r in rows} == {
        (Delivery.Status.DEAD, ErrorKind.LISTEN_ENDED)
    }
    problem = assert_problem(scoped.get(messages(session["id"])), 410)
    assert "ended" in problem["detail"] and "start a new one" in problem["detail"]
    ack = scoped.post(messages(session["id"]) + "/ack", {"ids": [leased["id"]]})
    assert ack.json() == {"acked": [], "rejected": [leased["id"]]}


def test_ending_twice_is_still_a_204_and_keeps_the_first_reason(scoped, merchant):
    session_id = started(scoped)["id"]

    first = scoped.delete(f"{SESSIONS}/{session_id}?reason=stopped")
    second = scoped.delete(f"{SESSIONS}/{session_id}")

    assert (first.status_code, second.status_code) == (204, 204)
    seen = scoped.get(f"{SESSIONS}/{session_id}").json()
    assert seen["ended_reason"] == "listen session ended: its command stopped"


def test_an_unknown_reason_is_a_422_and_ends_nothing(scoped, merchant):
    session_id = started(scoped)["id"]

    response = scoped.delete(f"{SESSIONS}/{session_id}?reason=bored")

    assert_problem(response, 422, ["query", "reason"])
    assert Endpoint.objects.get(pk=session_id).is_active


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_an_endpoint_that_is_no_session_is_a_404_there(scoped, merchant, method):
    endpoint = factories.endpoint(merchant, url="", kind="pull")

    response = scoped.call(method, f"{SESSIONS}/{endpoint.pk}")

    assert_problem(response, 404)
    assert Endpoint.objects.get(pk=endpoint.pk).is_active


def test_live_sessions_count_against_the_endpoint_quota_ended_ones_do_not(
    scoped, merchant
):
    merchant.max_endpoints = 2
    merchant.save()
    factories.endpoint(merchant, url="", kind="pull")
    session_id = started(scoped)["id"]
    before = row_counts()

    body = assert_problem(scoped.post(SESSIONS), 422, ["body"])
    assert "MAX_ENDPOINTS_PER_MERCHANT" in body["detail"]
    assert row_counts() == before

    scoped.delete(f"{SESSIONS}/{session_id}")
    assert started(scoped)["state"] == "live"


def test_a_session_ended_by_idling_reads_as_ended(scoped, merchant):
    session_id = started(scoped)["id"]
    session_end(endpoint=Endpoint.objects.get(pk=session_id), why="idle", now=utcnow())

    seen = scoped.get(f"{SESSIONS}/{session_id}").json()

    assert seen["state"] == "ended"
    assert "nothing pulled" in seen["ended_reason"]
    assert scoped.get(SESSIONS).json()["items"] == []


@pytest.mark.parametrize(
    ("method", "tail"),
    [("POST", ""), ("GET", ""), ("GET", "/{id}"), ("DELETE", "/{id}")],
)
def test_another_merchants_sessions_are_404_to_a_scoped_key(
    scoped, platform, other_merchant, method, tail
):
    theirs = platform.post("/merchants/globex/listen-sessions").json()["id"]
    before = (row_counts(), list(Endpoint.objects.values().order_by("pk")))

    url = "/merchants/globex/listen-sessions" + tail.format(id=theirs)
    response = scoped.call(method, url, {} if method == "POST" else None)

    assert_problem(response, 404)
    assert (row_counts(), list(Endpoint.objects.values().order_by("pk"))) == before
