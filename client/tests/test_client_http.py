"""The client against scripted servers on 127.0.0.1: retries, errors,
redirects, timeouts, and what it sends."""

from __future__ import annotations

import socket
from datetime import datetime, timezone

import pytest
from relay_stub import Sleeps, problem

from webhook_relay_client import (
    ApiError,
    Client,
    ProblemError,
    RetryPolicy,
    TransportError,
)
from webhook_relay_client.transport import MAX_ANSWER_BYTES

KEY = "rk_live_secret_value"
EVENT = {
    "id": "evt_1",
    "type": "order.paid",
    "merchant": "acme",
    "created_at": "2025-03-01T12:00:00.000Z",
    "deliveries": [{"id": "dlv_1", "endpoint_id": "ep_1", "status": "pending"}],
}
RATE_LIMITED = problem(429, "Too Many Requests", "Past acme's publish rate.")
UNAVAILABLE = problem(503, "Service Unavailable", "Try again.")


def client(url: str, sleeps: Sleeps, **kwargs) -> Client:
    return Client(url, KEY, sleep=sleeps, **kwargs)


def publish(c: Client, **kwargs):
    return c.publish(merchant="acme", type="order.paid", data={"n": 1}, **kwargs)


def test_a_rate_limited_publish_with_a_key_waits_retry_after_and_is_sent_again(
    stub, sleeps
):
    stub.answer(429, RATE_LIMITED, headers={"Retry-After": "2"}).answer(201, EVENT)
    event = publish(client(stub.url, sleeps), idempotency_key="order-1-paid")
    assert event.id == "evt_1" and not event.replayed
    assert sleeps == [2.0]
    assert [s.headers["idempotency-key"] for s in stub.sent] == ["order-1-paid"] * 2
    assert stub.sent[0].body == stub.sent[1].body


def test_an_asked_for_key_is_made_once_and_kept_across_retries(stub, sleeps):
    stub.answer(503, UNAVAILABLE, headers={"Retry-After": "1"}).answer(201, EVENT)
    publish(client(stub.url, sleeps), idempotency_key=True)
    keys = [s.headers["idempotency-key"] for s in stub.sent]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 36


def test_a_publish_without_a_key_is_never_sent_twice(stub, sleeps):
    stub.answer(429, RATE_LIMITED, headers={"Retry-After": "7"}).answer(201, EVENT)
    with pytest.raises(ProblemError) as raised:
        publish(client(stub.url, sleeps))
    assert raised.value.status == 429 and raised.value.retry_after == 7.0
    assert len(stub.sent) == 1 and sleeps == []
    assert "idempotency-key" not in stub.sent[0].headers


def test_a_batch_is_never_sent_twice(stub, sleeps):
    stub.answer(503, UNAVAILABLE).answer(201, {"items": [EVENT]})
    with pytest.raises(ProblemError, match="503"):
        client(stub.url, sleeps).publish_batch(
            [{"merchant": "acme", "type": "a", "data": {}}]
        )
    assert len(stub.sent) == 1


def test_retries_are_bounded(stub, sleeps):
    for _ in range(10):
        stub.answer(503, UNAVAILABLE, headers={"Retry-After": "1"})
    c = client(stub.url, sleeps, retry=RetryPolicy(max_retries=3))
    with pytest.raises(ProblemError) as raised:
        c.get_event("evt_1")
    assert raised.value.status == 503
    assert len(stub.sent) == 4 and sleeps == [1.0, 1.0, 1.0]


def test_a_long_retry_after_is_clamped(stub, sleeps):
    stub.answer(429, RATE_LIMITED, headers={"Retry-After": "3600"}).answer(
        200, EVENT | {"data": {}, "ordering_key": ""}
    )
    c = client(stub.url, sleeps, retry=RetryPolicy(max_wait=30.0))
    c.get_event("evt_1")
    assert sleeps == [30.0]


def test_a_retry_after_date_is_read_on_the_clients_clock(stub, sleeps):
    now = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
    stub.answer(
        503, UNAVAILABLE, headers={"Retry-After": "Sat, 01 Mar 2025 12:00:12 GMT"}
    ).answer(204)
    client(stub.url, sleeps, clock=lambda: now).delete_endpoint("acme", "ep_1")
    assert sleeps == [12.0]


def test_without_retry_after_the_waits_double(stub, sleeps):
    for _ in range(3):
        stub.answer(503, raw=b"busy")
    stub.answer(204)
    c = client(stub.url, sleeps, retry=RetryPolicy(backoff=0.25))
    c.delete_event_type("order.paid")
    assert sleeps == [0.25, 0.5, 1.0]


@pytest.mark.parametrize("status", [400, 404, 409, 422, 500, 502])
def test_other_failures_are_not_retried(stub, sleeps, status):
    stub.answer(status, problem(status, "No", "No.")).answer(204)
    with pytest.raises(ProblemError):
        client(stub.url, sleeps).delete_endpoint("acme", "ep_1")
    assert len(stub.sent) == 1 and sleeps == []


def test_a_problem_raises_with_its_status_title_detail_and_field_errors(stub, sleeps):
    stub.answer(
        422,
        problem(
            422,
            "Unprocessable Content",
            "The request has invalid fields.",
            [(["body", "url"], "Not a URL."), (["body", "event_types", 0], "Bad.")],
        ),
    )
    with pytest.raises(ProblemError) as raised:
        client(stub.url, sleeps).create_endpoint("acme", url="nope")
    error = raised.value
    assert (error.status, error.title, error.detail) == (
        422,
        "Unprocessable Content",
        "The request has invalid fields.",
    )
    assert [(e.loc, e.msg) for e in error.errors] == [
        (("body", "url"), "Not a URL."),
        (("body", "event_types", 0), "Bad."),
    ]
    assert error.errors_at("body", "url") == ("Not a URL.",)
    assert "body.url: Not a URL." in str(error)


def test_an_error_that_is_no_problem_raises_api_error_quoting_it(stub, sleeps):
    stub.answer(
        502, raw=b"<html>Bad gateway</html>", headers={"Content-Type": "text/html"}
    )
    with pytest.raises(ApiError) as raised:
        client(stub.url, sleeps).get_merchant("acme")
    assert not isinstance(raised.value, ProblemError)
    assert raised.value.status == 502 and "Bad gateway" in str(raised.value)


def test_a_success_that_is_not_json_raises_api_error(stub, sleeps):
    stub.answer(200, raw=b"<html>login</html>", headers={"Content-Type": "text/html"})
    with pytest.raises(ApiError, match="not JSON"):
        client(stub.url, sleeps).get_merchant("acme")


def test_an_answer_missing_a_field_raises_api_error(stub, sleeps):
    stub.answer(200, {"slug": "acme"})
    with pytest.raises(ApiError, match="lacks 'name'"):
        client(stub.url, sleeps).get_merchant("acme")


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else(
    stub, other_stub, sleeps
):
    stub.answer(
        302, raw=b"", headers={"Location": other_stub.url + "/api/v1/merchants/acme"}
    )
    with pytest.raises(ApiError, match="302 redirect to .* not followed"):
        client(stub.url, sleeps).get_merchant("acme")
    assert other_stub.sent == []


def test_a_server_that_never_answers_times_out(silent_port, sleeps):
    c = Client(f"http://127.0.0.1:{silent_port}", KEY, timeout=0.2, sleep=sleeps)
    with pytest.raises(TransportError, match="no answer"):
        c.get_merchant("acme")


def test_a_refused_connection_is_a_transport_error(sleeps):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections refused
        with pytest.raises(TransportError, match="no answer"):
            Client(f"http://127.0.0.1:{port}", KEY, sleep=sleeps).get_merchant("acme")


def test_the_key_is_sent_as_a_bearer_and_never_shown(stub, sleeps):
    stub.answer(401, problem(401, "Unauthorized", "Send a live API key."))
    c = client(stub.url, sleeps)
    with pytest.raises(ProblemError) as raised:
        c.get_merchant("acme")
    assert stub.sent[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(c) and KEY not in str(raised.value)


def test_a_repeated_key_answer_is_marked_replayed(stub, sleeps):
    stub.answer(200, EVENT, headers={"Idempotent-Replayed": "true"})
    assert publish(client(stub.url, sleeps), idempotency_key="k").replayed


def test_publish_sends_the_event_as_json(stub, sleeps):
    stub.answer(201, EVENT)
    publish(client(stub.url, sleeps), ordering_key="order-1")
    sent = stub.sent[0]
    assert (sent.method, sent.path) == ("POST", "/api/v1/events")
    assert sent.headers["content-type"] == "application/json"
    assert sent.json() == {
        "merchant": "acme",
        "type": "order.paid",
        "data": {"n": 1},
        "ordering_key": "order-1",
    }


def test_an_update_sends_only_the_fields_given_and_none_as_null(stub, sleeps):
    stub.answer(599)
    with pytest.raises(ApiError):
        client(stub.url, sleeps).update_endpoint(
            "acme", "ep_1", max_attempts=None, is_active=False
        )
    assert stub.sent[0].json() == {"max_attempts": None, "is_active": False}


@pytest.mark.parametrize("value", ["", ".", "..", None])
def test_a_path_value_that_would_leave_its_segment_is_refused(stub, sleeps, value):
    with pytest.raises(ValueError, match="not a usable id"):
        client(stub.url, sleeps).get_endpoint("acme", value)
    assert stub.sent == []


def test_a_path_value_is_quoted_into_one_segment(stub, sleeps):
    stub.answer(599)
    with pytest.raises(ApiError):
        client(stub.url, sleeps).get_endpoint("acme", "../../events/x?y")
    assert (
        stub.sent[0].path == "/api/v1/merchants/acme/endpoints/..%2F..%2Fevents%2Fx%3Fy"
    )


@pytest.mark.parametrize(
    ("base_url", "api"),
    [
        ("http://relay.test", "http://relay.test/api/v1"),
        ("http://relay.test/", "http://relay.test/api/v1"),
        ("http://relay.test/api/v1/", "http://relay.test/api/v1"),
        ("https://example.com/relay", "https://example.com/relay/api/v1"),
    ],
)
def test_the_base_url_takes_the_api_prefix_once(base_url, api):
    assert Client(base_url, KEY).base_url == api


@pytest.mark.parametrize("base_url", ["file:///etc/passwd", "relay.test", "ftp://x/"])
def test_a_base_url_that_is_not_http_is_refused(base_url):
    with pytest.raises(ValueError, match="http"):
        Client(base_url, KEY)


def test_an_answer_past_the_size_bound_is_refused(stub, sleeps):
    stub.answer(200, raw=b"x" * (MAX_ANSWER_BYTES + 1))
    with pytest.raises(TransportError, match="larger than"):
        client(stub.url, sleeps).get_merchant("acme")
