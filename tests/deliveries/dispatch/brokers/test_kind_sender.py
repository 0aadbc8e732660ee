"""KindSender (deliveries/dispatch/brokers/__init__.py): the routing, the
operator's host policy at send, one deadline per attempt, and error texts
without credentials. The broker senders themselves are tested against the
real brokers in the tests beside this one; here they are stand-ins whose
only job is to do what the router must cope with."""

from __future__ import annotations

import asyncio
import time

import pytest

from deliveries.dispatch.brokers import KindSender, scrubbed
from deliveries.dispatch.transport import OutgoingRequest, SendResult
from deliveries.models import ErrorKind


class HttpStandIn:
    def __init__(self) -> None:
        self.sent: list[OutgoingRequest] = []

    async def send(self, request):
        self.sent.append(request)
        return SendResult(200, 1.0)

    async def close(self) -> None:
        pass


class Publisher:
    """A broker sender that answers, raises or hangs, as told."""

    def __init__(self, *, answer="ack", error=None, hang=False) -> None:
        self.answer, self.error, self.hang = answer, error, hang
        self.messages, self.forgotten = [], []

    async def publish(self, message):
        self.messages.append(message)
        if self.hang:
            await asyncio.sleep(60)
        if self.error is not None:
            raise self.error
        return self.answer

    async def forget(self, message):
        self.forgotten.append(message)

    async def close(self) -> None:
        pass


def request(**changes) -> OutgoingRequest:
    fields = {
        "url": "amqp://127.0.0.1:5672/shop",
        "headers": {"webhook-id": "msg_1"},
        "body": b"{}",
        "tenant": 1,
        "kind": "rabbitmq",
        "target": {"exchange": "orders", "routing_key": "paid"},
        "credentials": "app:Hunter2%21pw",
        "broker_hosts": ("127.0.0.1",),
    }
    return OutgoingRequest(**(fields | changes))


def send(req, *, publisher=None, timeout=2.0, allow_private=False):
    async def go():
        sender = KindSender(
            http=HttpStandIn(),
            timeout=timeout,
            allow_private=allow_private,
            senders={} if publisher is None else {"rabbitmq": publisher},
        )
        try:
            return await sender.send(req), sender
        finally:
            await sender.close()

    return asyncio.run(go())


def test_an_http_request_goes_to_the_http_sender():
    result, sender = send(request(kind="http", url="http://127.0.0.1:9/"))
    assert result.status_code == 200
    assert len(sender.http.sent) == 1


def test_an_acknowledged_publish_is_a_success_with_the_brokers_words():
    publisher = Publisher(answer="publisher confirm: ack")
    result, _ = send(request(), publisher=publisher)
    assert result.acknowledged and result.status_code is None
    assert (result.error_kind, result.body_excerpt) == ("", "publisher confirm: ack")
    (message,) = publisher.messages
    assert (message.address, message.port, message.path) == ("127.0.0.1", 5672, "shop")
    assert (message.user, message.password) == ("app", "Hunter2!pw")
    assert message.headers["webhook-id"] == "msg_1"
    assert "Hunter2" not in repr(message)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"broker_hosts": ()}, "not enabled"),
        ({"broker_hosts": ("mq.example.com",)}, "not one the operator allows"),
        ({"broker_hosts": ("127.0.0.1:5673",)}, "not one the operator allows"),
        # A name that resolves to loopback, listed by name only.
        ({"url": "amqp://localhost:5672", "broker_hosts": ("localhost",)}, "private"),
    ],
)
def test_a_host_the_operator_did_not_allow_is_refused_at_send(changes, words):
    publisher = Publisher()
    result, _ = send(request(**changes), publisher=publisher)
    assert result.error_kind == ErrorKind.DESTINATION_BLOCKED
    assert words in result.error_message
    assert publisher.messages == []  # nothing was dialled


def test_a_broker_that_hangs_ends_at_the_deadline_and_its_link_is_dropped():
    publisher = Publisher(hang=True)
    began = time.monotonic()
    result, _ = send(request(), publisher=publisher, timeout=0.5)
    assert time.monotonic() - began < 1.5
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "0.5 s" in result.error_message
    assert len(publisher.forgotten) == 1


def test_no_credential_reaches_an_error_text():
    error = ConnectionError("AMQP login app:Hunter2%21pw / Hunter2!pw refused")
    result, _ = send(request(), publisher=Publisher(error=error))
    assert result.error_kind == ErrorKind.CONNECTION
    assert "Hunter2" not in result.error_message
    assert "***" in result.error_message


def test_scrubbed_leaves_text_without_credentials_alone():
    assert scrubbed("connection reset", "") == "connection reset"
    assert scrubbed("bad pass s3cr3t", "user:s3cr3t") == "bad pass ***"
