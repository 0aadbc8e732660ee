"""An echo receiver cannot hand a merchant its challenge, whole or cut.

The receiver on 127.0.0.1 answers 200 with the very request body it got. The
merchant, who chooses the URL and description that precede the challenge in
that body, lengthens them until the relay's cut of the answer (at the body
limit) falls after 47 of the challenge's 48 characters, as the security probe
did. Nothing the merchant can read of the attempts, through the API or the
portal, nor staff in the admin, holds 8 characters of either challenge in a
row. Real sender, real
sockets, real PostgreSQL.
"""

from __future__ import annotations

import random

import pytest
from django.urls import reverse

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Delivery
from deliveries.words import ANSWER_NOT_KEPT
from endpoints.models import Endpoint, Membership
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.api import api_as
from tests.support.fakes import BlockingSender, FakeClock, Received, Reply
from tests.support.portal import user_with_role

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# RESPONSE_BODY_LIMIT_BYTES as an operator may set it: at the default 4 KB a
# plain echo of the longest URL and description ends before the challenge.
BODY_LIMIT = 1024
WINDOW = 8  # the shortest run of a challenge's characters that must not show


def reflect(request: Received) -> Reply:
    return Reply(200, request.body, headers={"X-Echo": request.body[-200:].decode()})


def send_once() -> None:
    worker = Dispatcher(
        worker_id="w",
        sender=BlockingSender(timeout=5, body_limit=BODY_LIMIT, allow_private=True),
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=FakeClock(),
        rand=random.Random(3),
    )
    worker.run_once()
    worker.close()


def challenge_of(request: Received) -> tuple[str, int]:
    """The challenge a request carried, and where it starts in the body."""
    challenge = request.json["data"]["challenge"]
    return challenge, request.body.index(challenge.encode())


def runs_of(challenge: str) -> set[str]:
    return {challenge[i : i + WINDOW] for i in range(len(challenge) - WINDOW + 1)}


def test_a_cut_echo_leaves_no_part_of_the_challenge_to_read(
    receiver, client, admin_client
):
    receiver.respond = reflect
    merchant = factories.merchant("acme")
    merchant.require_endpoint_verification = True
    merchant.save()
    endpoint = factories.endpoint(merchant, url=receiver.url + "?pad=")

    # The merchant learns where the challenge sits from one answer...
    send_once()
    first, offset = challenge_of(receiver.received[-1])
    # ... and lengthens what precedes it so that the cut keeps all but its
    # last character (a URL change sends a new challenge at once).
    pad = BODY_LIMIT - (len(first) - 1) - offset
    description = "d" * min(pad, 500)
    endpoint_update(
        endpoint=endpoint,
        url=receiver.url + "?pad=" + "x" * (pad - len(description)),
        description=description,
        now=utcnow(),
    )
    send_once()
    second, offset = challenge_of(receiver.received[-1])
    assert second != first
    assert offset + len(second) - 1 == BODY_LIMIT  # 47 of 48 characters sent back

    assert Endpoint.objects.get(pk=endpoint.pk).awaiting_verification
    api = api_as(merchant)
    client.force_login(user_with_role(merchant, Membership.Role.DEVELOPER, "dev"))
    answers, pages, consoles = [], [], []
    for delivery in Delivery.objects.filter(endpoint=endpoint):
        answers.append(api.get(f"/deliveries/{delivery.pk}"))
        pages.append(
            client.get(
                reverse("portal:delivery_detail", args=[merchant.slug, delivery.pk])
            )
        )
        consoles.append(
            admin_client.get(
                reverse("admin:deliveries_delivery_change", args=[delivery.pk])
            )
        )
    assert [r.status_code for r in answers + pages + consoles] == [200] * 6
    readable = "".join(r.content.decode() for r in answers + pages + consoles)
    shown = [run for run in runs_of(first) | runs_of(second) if run in readable]
    assert shown == []

    # What they read instead, and it is true.
    for answer in answers:
        for attempt in answer.json()["attempts"]:
            assert attempt["response_excerpt"] == ANSWER_NOT_KEPT
            assert (attempt["status_code"], attempt["response_headers"]) == (200, None)
    for page in pages:
        assert "Not kept: the body and headers" in page.content.decode()
    for page in consoles:
        assert "not kept (the answer to a verification challenge)" in (
            page.content.decode()
        )
