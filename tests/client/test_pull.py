"""A pull consumer and `listen`'s calls through the client library, against
a live relay: messages pulled verify with the session's secret, acks and
nacks answer per id, and an ended session's pull is a ProblemError 410."""

from __future__ import annotations

import pytest
from webhook_relay_client import Client, ProblemError, verify

from endpoints.apikeys import apikey_create
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]


@pytest.fixture
def merchant_client(relay, transactional_db) -> tuple[Client, str]:
    """A client with a key scoped to a merchant of its own."""
    merchant = factories.merchant()
    _, key = apikey_create(name="listen", merchant=merchant)
    return Client(relay.url("/"), key), merchant.slug


def test_a_session_is_pulled_verified_answered_and_ended(merchant_client):
    client, slug = merchant_client
    session = client.listen_session_create(slug, event_types=["order.*"])
    client.publish(merchant=slug, type="order.paid", data={"name": "café"})
    client.publish(merchant=slug, type="order.shipped", data={"n": 2})
    client.publish(merchant=slug, type="customer.made", data={})  # not subscribed

    messages = client.messages_pull(slug, session.id, limit=10)

    payloads = [
        verify(session.secret, m.headers, m.body.encode("utf-8")) for m in messages
    ]
    assert [p["type"] for p in payloads] == ["order.paid", "order.shipped"]
    assert payloads[0]["data"] == {"name": "café"}
    paid, shipped = messages
    assert client.messages_ack(slug, session.id, [paid.id, "dl_nope"]).rejected == [
        "dl_nope"
    ]
    nacked = client.messages_nack(slug, session.id, [shipped.id], retry_after_seconds=0)
    assert (nacked.nacked, nacked.rejected) == ([shipped.id], [])
    assert [m.attempt for m in client.messages_pull(slug, session.id)] == [2]

    client.listen_session_end(slug, session.id, reason="stopped")
    client.listen_session_end(slug, session.id)  # twice: not an error
    ended = client.listen_session_get(slug, session.id)
    assert (ended.state, ended.ended_reason) == (
        "ended",
        "listen session ended: its command stopped",
    )
    with pytest.raises(ProblemError) as raised:
        client.messages_pull(slug, session.id)
    assert raised.value.status == 410
    assert list(client.listen_session_list(slug)) == []


def test_another_merchants_session_is_a_404(merchant_client, relay):
    client, _ = merchant_client
    theirs = factories.merchant()
    _, key = apikey_create(name="theirs", merchant=theirs)
    session = Client(relay.url("/"), key).listen_session_create(theirs.slug)

    for call in (
        lambda: client.messages_pull(theirs.slug, session.id),
        lambda: client.messages_ack(theirs.slug, session.id, ["x"]),
        lambda: client.listen_session_get(theirs.slug, session.id),
        lambda: client.listen_session_end(theirs.slug, session.id),
    ):
        with pytest.raises(ProblemError) as raised:
            call()
        assert raised.value.status == 404
