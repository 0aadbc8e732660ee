"""AuthorizingSender against a real token server and a real receiver on
127.0.0.1: Basic auth, OAuth2 client credentials fetched once and shared,
refreshed once on a 401, and every token failure an attempt of its own kind."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import time
from collections.abc import Callable
from urllib.parse import unquote_plus

import pytest

from deliveries.dispatch.credentials import EndpointAuth
from deliveries.dispatch.endpoint_auth import TOKEN_BODY_LIMIT, AuthorizingSender
from deliveries.dispatch.outgoing import recorded_headers
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest
from tests.support.fakes import FakeClock, Receiver, Reply
from tests.support.token_server import TokenReply, TokenServer, json_reply

SECRET = "cl1ent s3cret:/+&%"  # every character form encoding changes
CONCURRENT = 50


def oauth2(token_url: str, **changes) -> EndpointAuth:
    return EndpointAuth(
        **{
            "type": "oauth2",
            "endpoint_id": "ep_auth",
            "version": "v1",
            "secret": SECRET,
            "token_url": token_url,
            "client_id": "relay client",
            **changes,
        }
    )


def request_to(url: str, auth: EndpointAuth | None, **changes) -> OutgoingRequest:
    fields = {"url": url, "headers": {"webhook-id": "evt_1"}, "body": b"{}"}
    return OutgoingRequest(**{**fields, "auth": auth, **changes})


def authorizing(*, allow_private: bool = True, timeout: float = 5, monotonic=None):
    options = {"timeout": timeout, "allow_private": allow_private}
    return AuthorizingSender(
        http=AsyncSender(body_limit=1024, **options),
        tokens=AsyncSender(body_limit=TOKEN_BODY_LIMIT, **options),
        monotonic=monotonic or time.monotonic,
    )


def run(scenario: Callable, **options):
    """scenario(sender) on a fresh AuthorizingSender, closed at the end."""

    async def go():
        sender = authorizing(**options)
        try:
            return await scenario(sender)
        finally:
            await sender.close()

    return asyncio.run(go())


def send_together(requests: list[OutgoingRequest], **options):
    async def scenario(sender):
        return await asyncio.gather(*(sender.send(r) for r in requests))

    return run(scenario, **options)


def bearer_only(accepted: set[str]) -> Callable:
    """A receiver's answer: 200 to a bearer token in accepted, else 401."""

    def respond(received) -> Reply:
        given = received.headers.get("Authorization", "")
        ok = given.removeprefix("Bearer ") in accepted and given.startswith("Bearer ")
        return Reply(status=200 if ok else 401)

    return respond


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_request_without_auth_goes_straight_through(receiver):
    [result] = send_together([request_to(receiver.url, None)])

    assert result.status_code == 200
    assert "Authorization" not in receiver.received[0].headers


def test_basic_auth_sends_the_username_and_password_in_place_of_a_custom_one(
    receiver,
):
    auth = EndpointAuth(
        type="basic", endpoint_id="ep_b", version="v1", username="ops", secret=SECRET
    )
    request = request_to(receiver.url, auth, headers={"authorization": "custom"})

    [result] = send_together([request])

    assert result.status_code == 200
    headers = receiver.received[0].headers
    scheme, encoded = headers["Authorization"].split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == f"ops:{SECRET}"
    assert "custom" not in headers.values()


def test_the_token_request_is_a_client_credentials_grant_with_basic_client_auth(
    receiver,
):
    with TokenServer() as tokens:
        auth = oauth2(tokens.url, scope="hooks.write", audience="https://api.example")

        [result] = send_together([request_to(receiver.url, auth)])

        [asked] = tokens.requests
    assert result.status_code == 200
    assert receiver.received[0].headers["Authorization"] == "Bearer tok-1"
    assert asked.form == {
        "grant_type": "client_credentials",
        "scope": "hooks.write",
        "audience": "https://api.example",
    }
    assert asked.headers["Accept"] == "application/json"
    assert asked.headers["Content-Type"] == "application/x-www-form-urlencoded"
    scheme, encoded = asked.headers["Authorization"].split(" ")
    user, password = base64.b64decode(encoded).decode().split(":")
    assert scheme == "Basic"
    assert " " not in password + user  # form-urlencoded first (RFC 6749 2.3.1)
    assert (unquote_plus(user), unquote_plus(password)) == ("relay client", SECRET)


def test_fifty_concurrent_sends_to_one_endpoint_cause_one_token_request(receiver):
    with TokenServer() as tokens:
        auth = oauth2(tokens.url)

        results = send_together([request_to(receiver.url, auth)] * CONCURRENT)

        assert tokens.count == 1
    assert [r.status_code for r in results] == [200] * CONCURRENT
    assert {r.headers["Authorization"] for r in receiver.received} == {"Bearer tok-1"}


def test_a_revoked_token_is_refreshed_once_for_fifty_401s_and_each_send_resent():
    accepted = {"tok-1"}
    with TokenServer() as tokens, Receiver(bearer_only(accepted)) as receiver:
        auth = oauth2(tokens.url)

        async def scenario(sender):
            first = await sender.send(request_to(receiver.url, auth))
            accepted.clear()  # the receiver's gateway revokes tok-1
            accepted.add("tok-2")
            more = [request_to(receiver.url, auth)] * CONCURRENT
            return first, await asyncio.gather(*(sender.send(r) for r in more))

        first, results = run(scenario)

        assert tokens.count == 2
    assert first.status_code == 200
    assert [r.status_code for r in results] == [200] * CONCURRENT
    sent = [r.headers["Authorization"] for r in receiver.received]
    assert sent.count("Bearer tok-1") == 1 + CONCURRENT
    assert sent.count("Bearer tok-2") == CONCURRENT


def test_a_second_401_is_the_attempts_answer():
    with TokenServer() as tokens, Receiver(bearer_only(set())) as receiver:
        [result] = send_together([request_to(receiver.url, oauth2(tokens.url))])

        assert tokens.count == 2
    assert result.status_code == 401
    assert len(receiver.received) == 2


def test_a_token_is_fetched_again_shortly_before_it_expires(receiver):
    clock = FakeClock()
    with TokenServer(expires_in=100) as tokens:
        auth = oauth2(tokens.url)

        async def scenario(sender):
            await sender.send(request_to(receiver.url, auth))
            clock.advance(89)  # kept until 100 - 10 % of it
            await sender.send(request_to(receiver.url, auth))
            clock.advance(2)
            await sender.send(request_to(receiver.url, auth))

        run(scenario, monotonic=clock.monotonic)

        assert tokens.count == 2
    sent = [r.headers["Authorization"] for r in receiver.received]
    assert sent == ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]


def token_answer_of(reply: TokenReply):
    return lambda _request: reply


FAILING_TOKEN_SERVERS = {
    "a 500 with its error code": (
        json_reply(500, error="temporarily_unavailable", error_description=SECRET),
        "answered 500 (error temporarily_unavailable)",
    ),
    "a 401 quoting the secret": (
        json_reply(401, error=f"bad {SECRET}"),
        "answered 401 (another error code)",
    ),
    "a 400 quoting part of the secret": (
        json_reply(400, error=SECRET[:10]),
        "answered 400 (another error code)",
    ),
    "garbage": (TokenReply(200, b"<html>hello</html>"), "not JSON"),
    "no access_token": (json_reply(token_type="Bearer"), "without an access_token"),
    "a token that would split the header": (
        json_reply(access_token="abc\r\nX-Evil: 1", token_type="Bearer"),
        "not visible ASCII",
    ),
    "a token too long": (
        json_reply(access_token="a" * 9000, token_type="Bearer"),
        "at most 8192 characters",
    ),
    "a token type not bearer": (
        json_reply(access_token="abc", token_type="mac"),
        "token_type is not Bearer",
    ),
    "an expires_in not a number": (
        json_reply(access_token="abc", expires_in="soon"),
        "expires_in that is not a number",
    ),
    "an answer past the body limit": (
        TokenReply(200, b'{"access_token": "' + b"a" * 20000 + b'"}'),
        f"more than {TOKEN_BODY_LIMIT} bytes",
    ),
}


@pytest.mark.parametrize(
    ("reply", "said"), FAILING_TOKEN_SERVERS.values(), ids=FAILING_TOKEN_SERVERS
)
def test_a_token_server_that_gives_no_usable_token_is_auth_failed(
    receiver, reply, said
):
    with TokenServer() as tokens:
        tokens.answer = token_answer_of(reply)

        [result] = send_together([request_to(receiver.url, oauth2(tokens.url))])

    assert (result.status_code, result.error_kind) == (None, "auth_failed")
    assert said in result.error_message
    assert result.error_message.startswith(f"the token server 127.0.0.1:{tokens.port}")
    assert SECRET not in result.error_message
    assert SECRET[:10] not in result.error_message
    assert receiver.received == []


def test_a_token_server_that_is_down_is_auth_failed(receiver):
    url = f"http://127.0.0.1:{closed_port()}/oauth/token"

    [result] = send_together([request_to(receiver.url, oauth2(url))])

    assert result.error_kind == "auth_failed"
    assert "gave no token: Connection refused" in result.error_message
    assert receiver.received == []


def test_a_failed_fetch_fails_all_its_waiters_and_is_not_kept(receiver):
    with TokenServer() as tokens:
        tokens.answer = token_answer_of(json_reply(503))
        auth = oauth2(tokens.url)

        async def scenario(sender):
            waiting = [sender.send(request_to(receiver.url, auth))] * 10
            failed = await asyncio.gather(*waiting)
            tokens.answer = None  # the token server is back
            return failed, await sender.send(request_to(receiver.url, auth))

        failed, later = run(scenario)

        assert tokens.count == 2
    assert {r.error_kind for r in failed} == {"auth_failed"}
    assert later.status_code == 200


def test_a_token_url_on_a_private_address_is_refused_and_never_asked(receiver):
    with TokenServer() as tokens:
        [result] = send_together(
            [request_to(receiver.url, oauth2(tokens.url))], allow_private=False
        )

        assert tokens.count == 0
    assert result.error_kind == "destination_blocked"
    assert result.error_message.startswith("token URL: ")
    assert "127.0.0.1" in result.error_message
    assert receiver.received == []


def test_a_stalled_token_server_ends_the_attempt_within_its_timeout(receiver):
    with TokenServer() as tokens:
        tokens.stall = True
        request = request_to(receiver.url, oauth2(tokens.url), timeout=0.3)

        async def scenario(sender):
            # Far past the attempt's 0.3 s: only a hang would reach it.
            async with asyncio.timeout(10):
                return await sender.send(request)

        result = run(scenario)

    assert result.error_kind == "auth_failed"
    assert "0.3 s" in result.error_message


def test_the_send_after_a_slow_token_gets_only_the_time_left():
    """Token (0.6 s) and receiver (0.6 s) each within the 1 s timeout, but
    not both: the attempt is the timeout, not a 1.2 s success."""
    with TokenServer() as tokens, Receiver(lambda _r: Reply(delay=0.6)) as receiver:
        tokens.delay = 0.6
        request = request_to(receiver.url, oauth2(tokens.url), timeout=1.0)

        [result] = send_together([request])

    assert result.error_kind == "timeout"


def test_no_secret_or_token_reaches_a_result_its_record_or_the_logs(caplog):
    caplog.set_level(logging.DEBUG)
    accepted: set[str] = set()
    with TokenServer() as tokens, Receiver(bearer_only(accepted)) as receiver:
        auth = oauth2(tokens.url)
        basic = EndpointAuth(
            type="basic", endpoint_id="b", version="1", username="u", secret=SECRET
        )
        requests = [request_to(receiver.url, auth), request_to(receiver.url, basic)]

        results = send_together(requests)  # both 401, the bearer one refreshed
        tokens.answer = token_answer_of(json_reply(500, error=SECRET))
        results += send_together(requests[:1])

    issued = tokens.issued
    assert issued == ["tok-1", "tok-2"]
    for request, result in zip(requests + requests[:1], results, strict=True):
        shown = repr(result) + repr(recorded_headers(request, secret_names=()))
        shown += repr(request)
        for hidden in [
            SECRET,
            *issued,
            base64.b64encode(f"u:{SECRET}".encode()).decode(),
        ]:
            assert hidden not in shown
    for hidden in [SECRET, *issued]:
        assert hidden not in caplog.text


def test_a_send_that_joins_a_slow_fetch_still_ends_at_its_own_deadline(receiver):
    with TokenServer() as tokens:
        tokens.delay = 1.0
        auth = oauth2(tokens.url)
        patient = request_to(receiver.url, auth, timeout=5)
        hurried = request_to(receiver.url, auth, timeout=0.3)

        patient_result, hurried_result = send_together([patient, hurried])

        assert tokens.count == 1
    assert patient_result.status_code == 200
    assert hurried_result.error_kind == "auth_failed"
    assert hurried_result.error_message.endswith("within 0.3 s")


def test_a_fetch_started_by_a_hurried_send_still_serves_a_patient_one(receiver):
    with TokenServer() as tokens:
        tokens.delay = 1.0
        auth = oauth2(tokens.url)
        hurried = request_to(receiver.url, auth, timeout=0.3)
        patient = request_to(receiver.url, auth, timeout=5)

        hurried_result, patient_result = send_together([hurried, patient])

        assert tokens.count == 1
    assert hurried_result.error_kind == "auth_failed"
    assert patient_result.status_code == 200
