"""Token fetches bounded per merchant and per dispatcher (token_slots.py),
and a receiver's 401 kept when no time is left to resend: AuthorizingSender
against real token servers and real receivers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace

from deliveries.dispatch.credentials import EndpointAuth
from deliveries.dispatch.endpoint_auth import (
    TOKEN_BODY_LIMIT,
    TOKEN_CONNECTIONS,
    AuthorizingSender,
    token_fetch_limit,
)
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest
from tests.support.fakes import FakeClock, Receiver, Reply
from tests.support.token_server import TokenServer, json_reply

HOSTILE, VICTIM = 1, 2  # merchants (tenants)
_endpoints = itertools.count()


def oauth2_request(
    url: str, token_url: str, *, tenant: int, timeout: float
) -> OutgoingRequest:
    auth = EndpointAuth(
        type="oauth2",
        endpoint_id=f"ep_slots_{next(_endpoints)}",  # an endpoint of its own
        version="v1",
        secret="s3cret",
        token_url=token_url,
        client_id="relay",
    )
    return OutgoingRequest(
        url=url, headers={}, body=b"{}", tenant=tenant, auth=auth, timeout=timeout
    )


def authorizing(*, fetches: int, per_tenant: int, monotonic=None):
    options = {"timeout": 5, "allow_private": True}
    return AuthorizingSender(
        http=AsyncSender(body_limit=1024, **options),
        tokens=AsyncSender(body_limit=TOKEN_BODY_LIMIT, limit=fetches, **options),
        token_fetches=fetches,
        tenant_token_fetches=per_tenant,
        **({"monotonic": monotonic} if monotonic else {}),
    )


async def stall(sender, stalled: TokenServer, *, sends: int, reached: int):
    """`sends` sends of the hostile merchant, each to an endpoint of its own
    whose token server never answers; returns them once `reached` fetches
    have arrived there."""
    tasks = [
        asyncio.ensure_future(
            sender.send(
                oauth2_request(
                    "http://127.0.0.1:9/hook", stalled.url, tenant=HOSTILE, timeout=30
                )
            )
        )
        for _ in range(sends)
    ]
    await asyncio.to_thread(stalled.wait_for, reached)
    assert stalled.count == reached
    return tasks


async def ended(sender, tasks) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sender.close()


def test_one_merchants_stalled_token_servers_leave_anothers_fetch_a_slot(receiver):
    """The review's scenario: the hostile merchant has as many endpoints as
    the dispatcher has fetch slots, and its token server never answers."""
    with TokenServer() as stalled, TokenServer() as honest:
        stalled.stall = True

        async def scenario():
            sender = authorizing(fetches=4, per_tenant=2)
            hostile = await stall(sender, stalled, sends=4, reached=2)
            try:
                victim = oauth2_request(
                    receiver.url, honest.url, tenant=VICTIM, timeout=2
                )
                return await sender.send(victim)
            finally:
                await ended(sender, hostile)

        result = asyncio.run(scenario())

        assert (stalled.count, honest.count) == (2, 1)  # its bound held
    assert (result.status_code, result.error_kind) == (200, "")
    assert receiver.received[0].headers["Authorization"] == "Bearer tok-1"


def test_a_fetch_the_relays_busy_slots_kept_from_starting_blames_no_token_server(
    receiver,
):
    with TokenServer() as stalled, TokenServer() as honest:
        stalled.stall = True

        async def scenario():
            sender = authorizing(fetches=2, per_tenant=2)
            hostile = await stall(sender, stalled, sends=2, reached=2)
            try:
                victim = oauth2_request(
                    receiver.url, honest.url, tenant=VICTIM, timeout=0.3
                )
                return await sender.send(victim)
            finally:
                await ended(sender, hostile)

        result = asyncio.run(scenario())

        assert honest.count == 0
    assert result.error_kind == "timeout"  # not auth_failed: no token server's fault
    assert result.error_message == (
        "no access token within 0.3 s: all 2 of the relay's token fetch slots "
        "were busy with other fetches, so the token server "
        f"127.0.0.1:{honest.port} was not asked"
    )
    assert receiver.received == []


def test_a_merchant_past_its_own_bound_is_told_its_fetches_hold_its_slots(receiver):
    with TokenServer() as stalled, TokenServer() as honest:
        stalled.stall = True

        async def scenario():
            sender = authorizing(fetches=8, per_tenant=2)
            hostile = await stall(sender, stalled, sends=2, reached=2)
            try:
                own = oauth2_request(
                    receiver.url, honest.url, tenant=HOSTILE, timeout=0.3
                )
                return await sender.send(own)
            finally:
                await ended(sender, hostile)

        result = asyncio.run(scenario())

        assert honest.count == 0
    assert result.error_kind == "timeout"
    assert result.error_message.startswith(
        "no access token within 0.3 s: this merchant's 2 token fetches allowed "
        "at once were all in flight to token servers that had not answered"
    )


def test_a_dispatcher_allows_a_token_fetch_per_send_slot_at_least():
    assert token_fetch_limit(10) == TOKEN_CONNECTIONS
    assert token_fetch_limit(2000) == 2000


def test_a_401_with_no_time_left_for_a_new_token_stays_the_attempts_answer():
    accepted = {"tok-1"}

    def bearer_only(received) -> Reply:
        given = received.headers.get("Authorization", "")
        return Reply(status=200 if given.removeprefix("Bearer ") in accepted else 401)

    with TokenServer() as tokens, Receiver(bearer_only) as receiver:

        async def scenario():
            sender = authorizing(fetches=4, per_tenant=4)
            try:
                first = oauth2_request(receiver.url, tokens.url, tenant=1, timeout=5)
                await sender.send(first)
                accepted.clear()  # tok-1 revoked
                tokens.delay = 2.0  # and the token server slow from now on
                again = replace(first, timeout=0.4)  # its endpoint: tok-1 kept
                return await sender.send(again)
            finally:
                await sender.close()

        result = asyncio.run(scenario())

        assert tokens.count == 2  # the refresh was asked for, too late
    assert (result.status_code, result.error_kind) == (401, "")


def test_a_401_whose_new_token_comes_as_time_runs_out_stays_the_attempts_answer():
    clock = FakeClock()
    with TokenServer() as tokens, Receiver(lambda _r: Reply(status=401)) as receiver:

        def issue_late(_asked):
            if tokens.count == 2:
                clock.advance(60)  # the refresh took the rest of the attempt
            return json_reply(access_token=f"tok-{tokens.count}", token_type="Bearer")

        tokens.answer = issue_late

        async def scenario():
            sender = authorizing(fetches=4, per_tenant=4, monotonic=clock.monotonic)
            try:
                request = oauth2_request(receiver.url, tokens.url, tenant=1, timeout=5)
                return await sender.send(request)
            finally:
                await sender.close()

        result = asyncio.run(scenario())

        assert tokens.count == 2
    assert (result.status_code, result.error_kind) == (401, "")
    assert len(receiver.received) == 1  # no resend without time for it
