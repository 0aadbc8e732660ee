"""Pull endpoints (kind "pull") made and changed over the REST API: no url,
nothing that shapes a send, a visibility timeout of their own, never
awaiting verification, and a kind that cannot change to or from pull."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from endpoints.services import endpoint_create
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.postgres

ENDPOINTS = "/merchants/acme/endpoints"
HOOK = "http://127.0.0.1:9/hook"
# What a pull endpoint is never sent, each with a value that says something.
SENDING = {
    "headers": {"X-Team": "billing"},
    "auth": {"type": "basic", "username": "u", "password": "p"},
    "tls": {"pkcs12": "AAAA"},
    "permanent_statuses": [400],
    "rate_limit_per_second": 5,
    "max_in_flight": 3,
    "timeout_seconds": 5,
}


def created(api, **fields) -> dict:
    response = api.post(ENDPOINTS, {"kind": "pull", **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_a_pull_endpoint_needs_no_url_and_shows_none(any_key):
    answer = created(any_key)

    assert (answer["kind"], answer["url"], answer["target"]) == ("pull", "", {})
    assert answer["visibility_timeout_seconds"] is None
    assert answer["listen_session"] is False
    assert answer["secret"].startswith("whsec_")
    row = Endpoint.objects.get(pk=answer["id"])
    assert (row.url, row.target, row.kind) == ("", {}, "pull")


def test_an_http_endpoint_without_a_url_is_still_a_422_on_url(platform, merchant):
    before = row_counts()

    body = assert_problem(platform.post(ENDPOINTS, {}), 422, ["body", "url"])

    assert body["errors"] == [{"loc": ["body", "url"], "msg": "Required."}]
    assert row_counts() == before


@pytest.mark.parametrize(("field", "value"), sorted(SENDING.items()))
def test_what_shapes_a_send_is_refused_naming_the_field(
    platform, merchant, field, value
):
    before = row_counts()

    response = platform.post(ENDPOINTS, {"kind": "pull", field: value})

    body = assert_problem(response, 422)
    assert body["errors"] == [
        {
            "loc": ["body", field],
            "msg": f"A pull endpoint takes no {field}: the relay sends it "
            "nothing, its consumer fetches its messages.",
        }
    ]
    assert row_counts() == before


@pytest.mark.parametrize(
    ("field", "value"), [("url", HOOK), ("target", {"topic": "orders"})]
)
def test_a_url_or_target_is_refused_not_dropped(platform, merchant, field, value):
    before = row_counts()

    assert_problem(
        platform.post(ENDPOINTS, {"kind": "pull", field: value}),
        422,
        ["body", field],
    )
    assert row_counts() == before


def test_empty_sending_fields_say_nothing_and_pass(platform, merchant):
    answer = created(platform, headers={}, permanent_statuses=[], auth=None, target={})

    assert (answer["headers"], answer["permanent_statuses"]) == ({}, [])


@pytest.mark.parametrize("seconds", [1, 43200])
def test_a_visibility_timeout_within_bounds_is_kept(platform, merchant, seconds):
    answer = created(platform, visibility_timeout_seconds=seconds)

    assert answer["visibility_timeout_seconds"] == seconds
    assert Endpoint.objects.get(pk=answer["id"]).visibility_timeout_seconds == seconds


@pytest.mark.parametrize("seconds", [0, -1, 43201, 2.5])
def test_a_visibility_timeout_out_of_bounds_is_a_422(platform, merchant, seconds):
    response = platform.post(
        ENDPOINTS, {"kind": "pull", "visibility_timeout_seconds": seconds}
    )

    assert_problem(response, 422, ["body", "visibility_timeout_seconds"])


def test_only_a_pull_endpoint_takes_a_visibility_timeout(platform, merchant):
    before = row_counts()
    response = platform.post(ENDPOINTS, {"url": HOOK, "visibility_timeout_seconds": 9})
    body = assert_problem(response, 422)
    assert body["errors"] == [
        {
            "loc": ["body", "visibility_timeout_seconds"],
            "msg": "Only a pull endpoint has a visibility timeout.",
        }
    ]
    assert row_counts() == before

    http = platform.post(ENDPOINTS, {"url": HOOK}).json()["id"]
    response = platform.patch(f"{ENDPOINTS}/{http}", {"visibility_timeout_seconds": 9})
    assert_problem(response, 422, ["body", "visibility_timeout_seconds"])
    assert Endpoint.objects.get(pk=http).visibility_timeout_seconds is None


def test_a_visibility_timeout_is_changed_and_cleared(platform, merchant):
    path = f"{ENDPOINTS}/{created(platform)['id']}"

    changed = platform.patch(path, {"visibility_timeout_seconds": 120}).json()
    cleared = platform.patch(path, {"visibility_timeout_seconds": None}).json()

    assert changed["visibility_timeout_seconds"] == 120
    assert cleared["visibility_timeout_seconds"] is None


def test_a_pull_endpoint_never_awaits_verification(platform, merchant, settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    http = platform.post(ENDPOINTS, {"url": HOOK}).json()

    pull = created(platform)

    assert http["verification"]["state"] == "awaiting"  # the setting is in force
    assert pull["verification"]["state"] == "not_required"
    assert Endpoint.objects.get(pk=pull["id"]).verification_challenge is None


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("http", {"kind": "pull"}),
        ("pull", {"kind": "http", "url": HOOK}),
        ("pull", {"kind": "http", "url": HOOK, "headers": {"X-A": "b"}}),
        ("pull", {"kind": "mqtt", "url": "mqtt://127.0.0.1:1883"}),
    ],
)
def test_a_kind_cannot_change_to_or_from_pull(platform, merchant, kind, change):
    url = HOOK if kind == "http" else None
    endpoint_id = created(platform, kind=kind, url=url)["id"]
    before = Endpoint.objects.values().get(pk=endpoint_id)

    response = platform.patch(f"{ENDPOINTS}/{endpoint_id}", change)

    body = assert_problem(response, 422)
    assert [e["loc"] for e in body["errors"]] == [["body", "kind"]]
    assert "create a new endpoint" in body["errors"][0]["msg"]
    assert Endpoint.objects.values().get(pk=endpoint_id) == before


@pytest.mark.parametrize(("field", "value"), sorted(SENDING.items()))
def test_a_change_cannot_give_a_pull_endpoint_what_shapes_a_send(
    platform, merchant, field, value
):
    endpoint_id = created(platform)["id"]
    before = Endpoint.objects.values().get(pk=endpoint_id)

    response = platform.patch(f"{ENDPOINTS}/{endpoint_id}", {field: value})

    assert_problem(response, 422, ["body", field])
    assert Endpoint.objects.values().get(pk=endpoint_id) == before


def test_a_change_cannot_give_a_pull_endpoint_a_url(platform, merchant):
    endpoint_id = created(platform)["id"]

    response = platform.patch(f"{ENDPOINTS}/{endpoint_id}", {"url": HOOK})

    assert_problem(response, 422, ["body", "url"])
    assert Endpoint.objects.get(pk=endpoint_id).url == ""


def test_the_rest_works_as_for_http(platform, merchant):
    fields = {
        "signing": "both",
        "event_types": ["order.*"],
        "filter": {"data": {"amount": {"$gte": 100}}},
        "ordered": True,
        "max_attempts": 4,
        "retry_schedule": [5, 30],
        "description": "warehouse, behind NAT",
    }

    answer = created(platform, **fields)
    changed = platform.patch(
        f"{ENDPOINTS}/{answer['id']}",
        {"signing": "v1", "event_types": [], "ordered": False, "max_attempts": 2},
    ).json()

    assert {name: answer[name] for name in fields} == fields
    assert answer["public_key"].startswith("whpk_")
    assert (changed["signing"], changed["event_types"]) == ("v1", [])
    assert (changed["ordered"], changed["max_attempts"]) == (False, 2)


def test_pull_endpoints_count_against_the_endpoint_quota(platform, merchant):
    merchant.max_endpoints = 1
    merchant.save()
    created(platform)
    before = row_counts()

    body = assert_problem(platform.post(ENDPOINTS, {"kind": "pull"}), 422, ["body"])

    assert "MAX_ENDPOINTS_PER_MERCHANT" in body["detail"]
    assert row_counts() == before


def test_the_service_makes_one_without_a_url_as_the_portal_does(db):
    endpoint = endpoint_create(
        merchant=factories.merchant(),
        kind="pull",
        visibility_timeout_seconds=90,
        now=utcnow(),
    )

    assert (endpoint.kind, endpoint.url, endpoint.visibility_timeout_seconds) == (
        "pull",
        "",
        90,
    )
