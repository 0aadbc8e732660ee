"""One host, one meaning (issue 19, item 4): the policy judges the host the
sender connects to, after yarl's UTS 46 mapping, at save and at send."""

from __future__ import annotations

import random

import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Delivery
from deliveries.services import event_publish
from endpoints.destinations import DestinationRefused, check_url
from endpoints.models import Endpoint
from tests.endpoints.test_destinations import PUBLIC_IP, resolver
from tests.support import factories
from tests.support.fakes import BlockingSender, FakeClock
from tests.support.hostile import HostileReceiver

# U+1FBF1, U+1FBF2, U+1FBF7: segmented digits 1, 2, 7. IDNA 2003 (Python's
# codec) keeps them as a name, xn--ub0icp.0.0.1; UTS 46 (yarl, aiohttp) maps
# them to digits, and the URL becomes the IP literal 127.0.0.1.
SEGMENTED = "\U0001fbf1\U0001fbf2\U0001fbf7.0.0.1"
IDNA_2003_FORM = "xn--ub0icp.0.0.1"


def wildcard():
    """A resolver that gives every name, in either form, a public address."""
    return resolver({SEGMENTED: [PUBLIC_IP], IDNA_2003_FORM: [PUBLIC_IP]})


def test_a_host_that_uts46_turns_into_loopback_is_refused_at_save():
    with pytest.raises(DestinationRefused) as refused:
        check_url(f"http://{SEGMENTED}:8080/", allow_private=False, resolve=wildcard())
    assert "IDNA 2003 and UTS 46" in refused.value.reason


def test_the_api_refuses_it_naming_the_url(settings, db):
    from tests.support.api import api_as, assert_problem

    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
    merchant = factories.merchant("acme")
    response = api_as(None).post(
        f"/merchants/{merchant.slug}/endpoints", {"url": f"http://{SEGMENTED}/"}
    )
    problem = assert_problem(response, 422, ["body", "url"])
    assert "IDNA 2003 and UTS 46" in problem["errors"][0]["msg"]
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize(
    ("url", "asked"),
    [
        ("https://\u4f8b\u3048.jp/", "xn--r8jz45g.jp"),  # both forms agree
        ("https://\u212fxample.com/", "example.com"),  # script e: both map to e
        ("https://EXAMPLE.com/", "example.com"),
    ],
)
def test_a_host_is_resolved_in_the_form_the_sender_uses(url, asked):
    resolve = resolver({asked: [PUBLIC_IP]})
    assert check_url(url, allow_private=False, resolve=resolve) == [PUBLIC_IP]
    assert resolve.calls == [(asked, 443)]


@pytest.mark.parametrize(
    "url",
    [
        "https://fa\u00df.de/",  # IDNA 2003: fass.de; UTS 46: xn--fa-hia.de
        f"https://{SEGMENTED}/",
    ],
)
def test_a_host_read_two_ways_is_refused_before_resolving(url):
    def must_not_resolve(host: str, port: int) -> list[str]:
        raise AssertionError(host)

    with pytest.raises(DestinationRefused, match="IDNA 2003 and UTS 46"):
        check_url(url, allow_private=False, resolve=must_not_resolve)


def test_an_ipv6_literal_is_judged_in_its_normalised_form():
    with pytest.raises(DestinationRefused, match="private or loopback"):
        check_url("http://[0:0:0::1]/", allow_private=False)


@pytest.mark.django_db(transaction=True)
def test_forced_into_the_database_it_is_never_sent_to_loopback(settings):
    """Written behind the API's back (an old row, a manual UPDATE): the send is
    refused, and the loopback server that the URL means to aiohttp sees no
    connection, though a wildcard resolver calls the name public."""
    clock = FakeClock()
    with HostileReceiver() as canary:
        endpoint = factories.endpoint(url=canary.url("ok"))
        url = f"http://{SEGMENTED}:{canary.port}/ok"
        Endpoint.objects.filter(pk=endpoint.pk).update(url=url)
        event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())
        settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = False
        sender = BlockingSender(
            timeout=5, body_limit=100, allow_private=False, resolve=wildcard()
        )
        worker = Dispatcher(
            worker_id="w",
            sender=sender,
            batch_size=10,
            concurrency=1,
            lease_seconds=60,
            clock=clock,
            rand=random.Random(3),
        )
        worker.run_once()
        worker.close()
        connections = canary.connections

    delivery = Delivery.objects.get()
    assert connections == 0
    assert delivery.status == "dead"
    attempt = delivery.attempts.get()
    assert attempt.error_kind == "destination_blocked"
    assert "IDNA 2003 and UTS 46" in attempt.error_message
