"""One merchant's stalled DNS stalls only that merchant (a real dispatcher
process whose resolv.conf names a real DNS server on loopback).

Merchant A's receivers are on names whose DNS never answers; merchant B's on
a name that answers at once. B's send goes out while A's lookups hang, A's
sends end as A's own dns_error (never a timeout), and SIGTERM ends the
dispatcher while A's lookups are still hanging in getaddrinfo.
"""

from __future__ import annotations

import signal
import time

import pytest

from deliveries.dispatch.resolver import DNS_LOOKUPS_PER_TENANT
from deliveries.models import Attempt, Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import Endpoint
from tests.support import factories
from tests.support.dns import DnsServer
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

STALLED = "stall.relay-test"
TIMEOUT = 6  # HTTP_TIMEOUT_SECONDS: a lookup gets half of it
HOSTILE_NAMES = 40  # more than the 32 lookup threads a dispatcher once shared


def renamed(endpoint: Endpoint, url: str) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(url=url)


def test_a_merchant_whose_dns_stalls_delays_no_other_merchant(
    receiver, dispatchers, tmp_path
):
    port = receiver.server.server_port
    with DnsServer({"victim.relay-test": "127.0.0.1"}, silent=STALLED) as dns:
        # Names that answered when they were saved (the test's own resolver
        # knows none of them, so they are set on the rows directly).
        hostile = factories.merchant()
        for n in range(HOSTILE_NAMES):
            renamed(factories.endpoint(hostile), f"http://r{n}.{STALLED}:{port}/hook")
        victim = factories.merchant()
        renamed(factories.endpoint(victim), f"http://victim.relay-test:{port}/hook")
        events_publish(merchant=hostile, events=[EventInput("order.paid", {})])
        child = dispatchers.start(
            "--worker-id=dns-fair",
            env={"HTTP_TIMEOUT_SECONDS": str(TIMEOUT)},
            # glibc waits 60 s for a silent server: far past the test's end.
            wrap=dns.resolv_wrapper(tmp_path, timeout=60),
        )
        wait_until(
            lambda: len(dns.asked_under(STALLED)) >= DNS_LOOKUPS_PER_TENANT,
            timeout=30,
            what="the hostile merchant's lookups to start",
        )

        events_publish(merchant=victim, events=[EventInput("order.paid", {})])
        mine = Delivery.objects.get(endpoint__merchant=victim)
        wait_until(
            lambda: Attempt.objects.filter(delivery=mine).exists(),
            timeout=30,
            what="the victim's attempt",
        )
        attempt = Attempt.objects.get(delivery=mine)
        assert (attempt.status_code, attempt.error_kind) == (200, ""), (
            attempt.error_message
        )
        assert len(receiver.received) == 1

        wait_until(
            lambda: (
                Attempt.objects.filter(delivery__endpoint__merchant=hostile).count()
                == HOSTILE_NAMES
            ),
            timeout=60,
            what="every hostile send to end",
        )
        kinds = Attempt.objects.filter(
            delivery__endpoint__merchant=hostile
        ).values_list("error_kind", "error_message")
        assert {kind for kind, _ in kinds} == {"dns_error"}, set(kinds)
        # A merchant holds at most its own slots while its DNS hangs.
        assert len(dns.asked_under(STALLED)) <= DNS_LOOKUPS_PER_TENANT

        # Its lookups still hang in getaddrinfo; the process stops anyway.
        child.signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        assert child.wait(60) == 0, child.stderr[-3000:]
        # The documented bound: HTTP_TIMEOUT_SECONDS and a few seconds (loose,
        # as in test_graceful_shutdown: a loaded 2-core machine is slow).
        assert time.monotonic() - stopped_at < TIMEOUT + 9
