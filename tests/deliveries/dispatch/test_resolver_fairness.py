"""DNS lookups at send time are bounded per merchant and end in time.

getaddrinfo blocks and cannot be interrupted: a merchant whose DNS stalls
holds threads until glibc gives up. These tests stall a real thread on a
resolver that waits for the test's word, and check that only that merchant
waits, that its sends end as its own dns_error, and that a hung lookup never
keeps a process from exiting.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from deliveries.dispatch.resolver import DNS_LOOKUPS_PER_TENANT, CheckedAddresses
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest
from endpoints.destinations import DNS_ERROR, DestinationRefused
from tests.endpoints.test_destinations import PUBLIC_IP

HOSTILE, VICTIM = 1, 2


class StallingDns:
    """Answers names ending in .ok at once; the rest hang until release()."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._released = threading.Event()

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if not host.endswith(".ok"):
            self._released.wait(30)
        return [PUBLIC_IP]

    def release(self) -> None:
        self._released.set()


@pytest.fixture
def dns():
    stalling = StallingDns()
    yield stalling
    stalling.release()


def outcome(awaitable):
    async def go():
        try:
            return await awaitable
        except DestinationRefused as refused:
            return refused

    return go()


def test_a_merchant_whose_dns_stalls_leaves_other_merchants_their_lookups(dns):
    async def go():
        addresses = CheckedAddresses(allow_private=False, resolve=dns, lookup_timeout=2)
        hostile = [outcome(addresses(f"h{n}.stalled", 443, HOSTILE)) for n in range(40)]
        stalled = asyncio.gather(*hostile)
        await asyncio.sleep(0)  # the hostile lookups ask first
        victim = await outcome(addresses("victim.ok", 443, VICTIM))
        return victim, await stalled

    victim, hostile = asyncio.run(go())

    assert victim == [PUBLIC_IP]
    assert {r.code for r in hostile} == {DNS_ERROR}
    # Only the merchant's own slots were ever held by its stalled names.
    assert len([h for h in dns.asked if h.endswith(".stalled")]) == (
        DNS_LOOKUPS_PER_TENANT
    )


def test_a_lookup_that_gets_no_answer_is_a_dns_error_that_says_so(dns):
    addresses = CheckedAddresses(allow_private=False, resolve=dns, lookup_timeout=0.5)

    refused = asyncio.run(outcome(addresses("slow.stalled", 443, HOSTILE)))

    assert refused.code == DNS_ERROR
    assert refused.reason == (
        "could not resolve host 'slow.stalled': no answer from DNS within 0.5 s"
    )


def test_a_lookup_behind_the_merchants_own_stalled_ones_says_it_was_not_asked(dns):
    async def go():
        addresses = CheckedAddresses(
            allow_private=False, resolve=dns, lookup_timeout=0.5, per_tenant=1
        )
        first = asyncio.ensure_future(outcome(addresses("a.stalled", 443, HOSTILE)))
        await asyncio.sleep(0)
        second = await outcome(addresses("b.stalled", 443, HOSTILE))
        return await first, second

    first, second = asyncio.run(go())

    assert "no answer from DNS" in first.reason
    assert second.reason == (
        "could not resolve host 'b.stalled': not looked up within 0.5 s: earlier "
        "DNS lookups of this merchant's hosts have not answered yet"
    )
    assert dns.asked == ["a.stalled"]


def test_slots_come_back_when_a_stalled_lookup_answers(dns):
    async def go():
        addresses = CheckedAddresses(
            allow_private=False, resolve=dns, lookup_timeout=0.5, per_tenant=1
        )
        await outcome(addresses("a.stalled", 443, HOSTILE))
        dns.release()
        while addresses._tenants:  # the thread hands its slot back to the loop
            await asyncio.sleep(0.01)
        return await addresses("b.stalled", 443, HOSTILE)

    assert asyncio.run(go()) == [PUBLIC_IP]


def test_a_send_whose_lookup_hangs_is_a_dns_error_not_a_timeout(dns):
    async def go():
        sender = AsyncSender(timeout=2, body_limit=64, allow_private=False, resolve=dns)
        try:
            return await sender.send(
                OutgoingRequest(
                    url="https://hung.stalled/hook", headers={}, body=b"{}", tenant=1
                )
            )
        finally:
            await sender.close()

    result = asyncio.run(go())

    assert (result.status_code, result.error_kind) == (None, "dns_error")
    assert "no answer from DNS within 1 s" in result.error_message


HUNG_LOOKUP_THEN_EXIT = """
import asyncio, threading
from deliveries.dispatch.resolver import CheckedAddresses
from endpoints.destinations import DestinationRefused

def hang(host, port):
    threading.Event().wait()  # a getaddrinfo that never returns

async def go():
    addresses = CheckedAddresses(allow_private=True, resolve=hang, lookup_timeout=0.2)
    try:
        await addresses("hung.example", 443, 1)
    except DestinationRefused as refused:
        print(refused.code)
    addresses.close()

asyncio.run(go())
"""


def test_a_hung_lookup_does_not_keep_the_process_alive():
    done = subprocess.run(
        [sys.executable, "-c", HUNG_LOOKUP_THEN_EXIT],
        capture_output=True,
        text=True,
        timeout=30,  # a thread the interpreter joins at exit would hang forever
    )
    assert (done.returncode, done.stdout) == (0, "dns_error\n"), done.stderr


def test_a_name_both_merchants_use_is_looked_up_for_each_on_its_own_slots(dns):
    # The hostile merchant's lookup of the shared name waits behind its own
    # stalled ones; the victim's send to that name must not join it.
    async def go():
        addresses = CheckedAddresses(
            allow_private=False, resolve=dns, lookup_timeout=2, per_tenant=1
        )
        stalled = asyncio.ensure_future(outcome(addresses("h.stalled", 443, HOSTILE)))
        await asyncio.sleep(0)
        queued = asyncio.ensure_future(outcome(addresses("shared.ok", 443, HOSTILE)))
        await asyncio.sleep(0)
        victim = await outcome(addresses("shared.ok", 443, VICTIM))
        return victim, await queued, await stalled

    victim, _, _ = asyncio.run(go())

    assert victim == [PUBLIC_IP]
