"""The MQTT sender against real Mosquitto brokers on loopback: the shared one
(127.0.0.1:1883, anonymous) and, where credentials, permissions or TLS are
under test, a mosquitto this module starts on a port of its own."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import json
import os
import socket
import ssl
import subprocess
import time
import uuid
import warnings

import aiomqtt
import pytest
import trustme
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.brokers import BrokerFailure, BrokerMessage, KindSender
from deliveries.dispatch.brokers.mqtt import (
    NOT_MQTT_5,
    Sender,
    connack_check,
    puback_answer,
)
from deliveries.dispatch.outgoing import signed_request
from deliveries.dispatch.transport import wire_headers
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support.jobs import a_job
from tests.support.mosquitto import (
    MOSQUITTO_PASSWD,
    Mosquitto,
    ScriptedBroker,
    connections_to,
    packet_types,
)

SHARED = ("127.0.0.1", 1883)
SECRET = "whsec_c2VjcmV0"  # a_job()'s signing secret
WAIT_SECONDS = 5  # the most a test waits for a broker or a consumer
USER, PASSWORD = "relay", "S3cret-pass-4f1c"
WRONG_PASSWORD = "Wr0ng-pass-9a7e"
ALLOWED = "allowed"  # the private broker lets USER publish under allowed/#


class NoHttp:
    """HTTP is not under test here: a broker request must never reach it."""

    async def send(self, request):
        raise AssertionError(f"an http send of {request.url}")

    async def close(self) -> None:
        pass


def unique_topic() -> str:
    return f"relay-test/{uuid.uuid4().hex[:12]}"


def a_request(port: int, topic: str, *, host: str = "127.0.0.1", **changes):
    scheme = changes.pop("scheme", "mqtt")
    return dataclasses.replace(
        signed_request(a_job(), timestamp=int(time.time())),
        url=f"{scheme}://{host}:{port}",
        kind="mqtt",
        target={"topic": topic},
        broker_hosts=changes.pop("broker_hosts", ("127.0.0.1",)),
        **changes,
    )


def a_message(port: int, topic: str = "t") -> BrokerMessage:
    """A message as KindSender hands it to a Sender, for tests of the Sender."""
    return BrokerMessage(
        kind="mqtt",
        host="127.0.0.1",
        address="127.0.0.1",
        port=port,
        tls=False,
        path="",
        target={"topic": topic},
        headers={"webhook-id": "evt_1"},
        body=b"{}",
        timeout=3.0,
    )


def run(step, *, timeout: float = 3.0, **options):
    """step(sender) on a KindSender of its own, closed after."""

    async def go():
        sender = KindSender(
            http=NoHttp(), timeout=timeout, allow_private=False, **options
        )
        try:
            return await step(sender)
        finally:
            await sender.close()

    return asyncio.run(go())


def send(request, **options):
    return run(lambda sender: sender.send(request), **options)


@contextlib.asynccontextmanager
async def subscriber(topic: str):
    """A consumer of the shared broker, subscribed (QoS 1) before it yields."""
    async with aiomqtt.Client(
        *SHARED,
        identifier=f"relay-test-{uuid.uuid4().hex[:8]}",
        protocol=aiomqtt.ProtocolVersion.V5,
        timeout=WAIT_SECONDS,
    ) as client:
        await client.subscribe(topic, qos=1)
        yield client


@pytest.fixture(scope="module")
def private_broker(tmp_path_factory):
    """Only USER with PASSWORD may connect, and publish only under ALLOWED/."""
    folder = tmp_path_factory.mktemp("mosquitto")
    subprocess.run(
        [MOSQUITTO_PASSWD, "-c", "-b", str(folder / "passwords"), USER, PASSWORD],
        check=True,
    )
    (folder / "acl").write_text(f"user {USER}\ntopic readwrite {ALLOWED}/#\n")
    broker = Mosquitto(
        folder,
        f"allow_anonymous false\npassword_file {folder / 'passwords'}\n"
        f"acl_file {folder / 'acl'}\n",
    )
    yield broker.port
    broker.close()


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    """mqtts with a certificate for broker.test only, from a CA of our own."""
    folder = tmp_path_factory.mktemp("mosquitto-tls")
    ca = trustme.CA()
    certificate = ca.issue_cert("broker.test")
    ca.cert_pem.write_to_path(folder / "ca.pem")
    certificate.cert_chain_pems[0].write_to_path(folder / "cert.pem")
    certificate.private_key_pem.write_to_path(folder / "key.pem")
    broker = Mosquitto(
        folder,
        f"allow_anonymous true\ncafile {folder / 'ca.pem'}\n"
        f"certfile {folder / 'cert.pem'}\nkeyfile {folder / 'key.pem'}\n",
    )
    context = ssl.create_default_context()
    ca.configure_trust(context)
    yield broker.port, context
    broker.close()


def test_a_subscriber_gets_the_body_and_headers_and_verifies_the_signature():
    topic = unique_topic()
    request = a_request(SHARED[1], topic)

    async def step(sender):
        async with subscriber(topic) as consumer:
            result = await sender.send(request)
            async with asyncio.timeout(WAIT_SECONDS):
                message = await consumer.messages.__anext__()
        return result, message

    result, message = run(step)
    assert (result.acknowledged, result.error_kind) == (True, "")
    assert result.body_excerpt == f"PUBACK (topic '{topic}', QoS 1)"
    assert message.payload == request.body
    headers = dict(message.properties.UserProperty)
    assert headers == wire_headers(request)
    assert message.properties.ContentType == "application/json"
    assert Webhook(SECRET).verify(message.payload, headers) == json.loads(request.body)


def test_a_topic_nobody_subscribes_to_is_delivered_and_says_so():
    result = send(a_request(SHARED[1], unique_topic()))
    assert result.acknowledged
    assert result.body_excerpt.endswith("QoS 1): 0x10 No matching subscribers")


@pytest.mark.parametrize(
    "code, answer",
    [
        (0x00, "PUBACK (topic 't', QoS 1)"),
        (0x10, "PUBACK (topic 't', QoS 1): 0x10 No matching subscribers"),
        (0x80, "broker_refused"),
        (0x83, "broker_refused"),
        (0x90, "broker_refused"),
        (0x97, "broker_refused"),
        (0x87, "broker_auth"),
    ],
)
def test_a_puback_below_0x80_is_a_delivery_and_any_other_a_refusal(code, answer):
    reason = ReasonCode(PacketTypes.PUBACK, identifier=code)
    if answer.startswith("PUBACK"):
        assert puback_answer("t", reason) == answer
        return
    with pytest.raises(BrokerFailure) as refused:
        puback_answer("t", reason)
    assert refused.value.kind == answer
    assert refused.value.message == (
        f"the broker refused the message: PUBACK 0x{code:02X} "
        f"{reason.getName()} (topic 't', QoS 1)"
    )


@pytest.mark.parametrize(
    "code, kind",
    [
        (0x00, ""),
        (0x86, "broker_auth"),
        (0x87, "broker_auth"),
        (0x89, "broker_refused"),
    ],
)
def test_a_connack_refusal_says_which(code, kind):
    reason = ReasonCode(PacketTypes.CONNACK, identifier=code)
    if not kind:
        connack_check(reason)
        return
    with pytest.raises(BrokerFailure) as refused:
        connack_check(reason)
    assert refused.value.kind == kind
    assert refused.value.message.endswith(f"CONNACK 0x{code:02X} {reason.getName()}")


@pytest.mark.parametrize(
    "credentials",
    [f"{USER}:{WRONG_PASSWORD}", f"nobody:{PASSWORD}", ""],
    ids=["wrong password", "unknown user", "anonymous"],
)
def test_credentials_the_broker_refuses_are_broker_auth_and_never_shown(
    private_broker, credentials
):
    request = a_request(private_broker, f"{ALLOWED}/x", credentials=credentials)
    result = send(request)
    for secret in (PASSWORD, WRONG_PASSWORD):
        assert secret not in result.error_message + result.body_excerpt
    assert (result.acknowledged, result.error_kind) == (False, "broker_auth")
    # Mosquitto 2.0 answers all three alike (0x86 is left unused).
    assert result.error_message == (
        "the broker refused the connection: CONNACK 0x87 Not authorized"
    )


def test_a_topic_the_user_may_not_publish_to_is_refused_and_the_connection_kept(
    private_broker,
):
    credentials = f"{USER}:{PASSWORD}"
    denied = a_request(private_broker, "elsewhere/x", credentials=credentials)
    allowed = a_request(private_broker, f"{ALLOWED}/x", credentials=credentials)

    async def step(sender):
        results = [await sender.send(denied), await sender.send(allowed)]
        return results, connections_to(private_broker)

    (refused, delivered), still_open = run(step)
    assert (refused.acknowledged, refused.error_kind) == (False, "broker_auth")
    assert refused.error_message == (
        "the broker refused the message: PUBACK 0x87 Not authorized "
        "(topic 'elsewhere/x', QoS 1)"
    )
    assert delivered.acknowledged
    assert still_open == 1  # a refused message does not cost the connection


def test_a_broker_that_does_not_speak_mqtt_5_gets_nothing_published():
    # What a 3.1.1-only broker answers a CONNECT of version 5: CONNACK
    # "unacceptable protocol version".
    with ScriptedBroker(b"\x20\x02\x00\x01") as broker:
        result = send(a_request(broker.port, unique_topic()))
    assert (result.acknowledged, result.error_kind) == (False, "broker_refused")
    assert result.error_message == NOT_MQTT_5
    assert [packet_types(bytes(got)) for got in broker.received] == [[1]]  # CONNECT


def test_a_publish_cancelled_at_its_deadline_leaves_its_connection_unused():
    # CONNACK "accepted" (MQTT 5, no properties), and then silence: no PUBACK.
    with ScriptedBroker(b"\x20\x03\x00\x00\x00") as broker:

        async def step():
            sender = Sender(limit=4)
            try:
                for _ in range(2):
                    with pytest.raises(TimeoutError):
                        async with asyncio.timeout(0.3):
                            await sender.publish(a_message(broker.port))
            finally:
                await sender.close()

        asyncio.run(step())
    # The second publish dialled anew: whether the first one's PUBLISH was
    # ever taken is unknown, so its connection is not trusted again.
    assert [packet_types(bytes(got)) for got in broker.received] == [[1, 3], [1, 3]]


def test_a_broker_that_hangs_up_before_connack_is_a_connection_error():
    with TcpProxy(SHARED) as proxy:
        proxy.cut()  # it takes each connection and closes it at once
        result = send(a_request(proxy.port, unique_topic()))
    assert (result.acknowledged, result.error_kind) == (False, "connection_error")
    assert result.error_message == (
        "the connection to the broker was lost before the broker answered CONNECT"
    )


def test_a_cut_connection_fails_one_attempt_and_the_next_dials_again():
    with TcpProxy(SHARED) as proxy:
        request = a_request(proxy.port, unique_topic())

        async def step(sender):
            first = await sender.send(request)
            proxy.cut()
            second = await sender.send(request)
            proxy.resume()
            return first, second, await sender.send(request)

        first, second, third = run(step)
    assert first.acknowledged
    assert (second.acknowledged, second.error_kind) == (False, "connection_error")
    assert "the connection to the broker was" in second.error_message
    assert third.acknowledged
    assert proxy.accepted == 2  # the pooled connection was dropped and dialled anew


def test_a_broker_that_never_answers_times_out_and_leaves_nothing_open():
    # The kernel completes the TCP handshake; nobody ever reads or answers.
    with socket.create_server(("127.0.0.1", 0)) as silent:

        async def step(sender):
            before = set(os.listdir("/proc/self/fd"))
            started = time.monotonic()
            result = await sender.send(a_request(silent.getsockname()[1], "t"))
            elapsed = time.monotonic() - started
            left = set(os.listdir("/proc/self/fd")) - before
            # aiomqtt's keepalive task, if it outlived the connection, would
            # run on (it checks every second, while its socket is open).
            others = asyncio.all_tasks() - {asyncio.current_task()}
            if others:
                await asyncio.wait(others, timeout=0.5)
            running = [task for task in others if not task.done()]
            return result, elapsed, left, running

        result, elapsed, left, running = run(step, timeout=1.0)
    assert (result.acknowledged, result.error_kind) == (False, "timeout")
    assert elapsed < 1.0 + 1
    assert left == set()  # the socket was closed
    assert running == []


def test_publishes_at_once_to_one_broker_share_one_connection():
    request = a_request(SHARED[1], unique_topic())

    async def step(sender):
        results = await asyncio.gather(*(sender.send(request) for _ in range(20)))
        return results, connections_to(SHARED[1])

    results, still_open = run(step)
    assert all(result.acknowledged for result in results)
    assert still_open == 1


def test_the_pool_keeps_at_most_its_limit_of_connections():
    topic = unique_topic()
    # The shared broker takes any user: three users are three pool keys.
    requests = [a_request(SHARED[1], topic, credentials=f"user-{n}:") for n in range(3)]

    async def step(sender):
        counts = []
        for request in requests:
            assert (await sender.send(request)).acknowledged
            counts.append(connections_to(SHARED[1]))
        return counts

    assert run(step, senders={"mqtt": Sender(limit=2)}) == [1, 2, 2]


def test_a_host_the_operator_did_not_list_is_blocked_before_any_connection():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        request = a_request(port, unique_topic(), broker_hosts=("mqtt.example.com",))
        result = send(request)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    assert (result.acknowledged, result.error_kind) == (False, "destination_blocked")


@pytest.mark.parametrize(
    "host, error_kind", [("broker.test", ""), ("other.test", "tls_error")]
)
def test_tls_checks_the_certificate_against_the_url_host_not_the_address(
    tls_broker, host, error_kind
):
    port, context = tls_broker
    request = a_request(
        port,
        unique_topic(),
        host=host,
        scheme="mqtts",
        broker_hosts=(host, "127.0.0.1"),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        result = send(
            request, ssl_context=context, resolve=lambda name, port: ["127.0.0.1"]
        )
        gc.collect()
    assert [w for w in caught if w.category is ResourceWarning] == []  # all closed
    assert (result.acknowledged, result.error_kind) == (not error_kind, error_kind)
    if error_kind:
        assert "other.test" in result.error_message
