"""The loopback brokers, as a merchant's consumer sees them (issue 41).

Each target below is a destination of its own on the shared broker (names
carry a uuid, so two test runs never meet) that starts broken in the way the
kind fails most plainly and is mended by fix(): a RabbitMQ exchange with no
queue bound (unroutable), a NATS subject with no JetStream stream, a Redis
key holding a string (WRONGTYPE), an MQTT broker behind a cut TcpProxy.
messages(at_least=n) reads everything that reached the consumer so far
(waiting, within bounds, for n where arrival lags the broker's
acknowledgement) in the order the broker kept it, as (headers, body), so
the test verifies it as any Standard Webhooks receiver would. close()
removes whatever the target made on the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import aio_pika
import nats
import paho.mqtt.client as mqtt
import redis
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import NotFoundError
from paho.mqtt.enums import CallbackAPIVersion
from standardwebhooks import Webhook

from deliveries.models import ErrorKind
from endpoints import brokers
from endpoints.models import Endpoint, EndpointSecret, Merchant
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support import factories

HOST = "127.0.0.1"
RABBITMQ_PORT, NATS_PORT, REDIS_PORT, MQTT_PORT = 5672, 4222, 6379, 1883
# What a dispatcher child needs to publish to them: the operator's list.
BROKER_ENV = {"RELAY_BROKER_HOSTS": HOST}
WAIT_SECONDS = 10  # the most a consumer waits for its broker to answer


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Message:
    headers: dict[str, str]
    body: bytes


def broker_endpoint(
    merchant: Merchant, *, kind: str, url: str, target: dict, **kwargs
) -> Endpoint:
    """A broker endpoint written with the ORM, as the services store one: the
    URL without its credentials, which go (encrypted) to broker_credentials.
    Made as an http endpoint first, so it has its secret and health rows."""
    parts = brokers.broker_url_split(kind, url)
    endpoint = factories.endpoint(merchant, **kwargs)
    endpoint.kind = kind
    endpoint.url = parts.url
    endpoint.target = brokers.target_clean(kind, target)
    endpoint.broker_credentials = parts.credentials or None
    endpoint.save(update_fields=["kind", "url", "target", "broker_credentials"])
    return endpoint


def verifier(endpoint: Endpoint) -> Callable[[Message], dict]:
    """verify(message): the event, once its signature checks out with the
    endpoint's secret (raises standardwebhooks' WebhookVerificationError)."""
    secret = EndpointSecret.objects.filter(endpoint=endpoint).latest("created_at")
    webhook = Webhook(secret.secret)
    return lambda message: webhook.verify(message.body, message.headers)


def verified(endpoint: Endpoint, message: Message) -> dict:
    return verifier(endpoint)(message)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RabbitUnbound:
    """A direct exchange of its own; fix() binds a queue under the routing key."""

    kind = brokers.RABBITMQ
    failure = ErrorKind.BROKER_REFUSED  # the mandatory publish comes back
    consumer_url = f"amqp://guest:guest@{HOST}:{RABBITMQ_PORT}/"

    def __init__(self) -> None:
        self.exchange = unique_name("relay-test-x")
        self.queue = unique_name("relay-test-q")
        self.url = self.consumer_url
        self.target = {"exchange": self.exchange, "routing_key": "orders"}
        self._taken: list[Message] = []  # a queue gives each message once
        self._bound = False
        self._run(self._declare_exchange)

    def fix(self) -> None:
        self._run(self._bind)
        self._bound = True

    def messages(self, at_least: int = 0) -> list[Message]:
        if self._bound:  # else no queue: what was published went nowhere
            self._taken += self._run(self._drain)
        return list(self._taken)

    def close(self) -> None:
        self._run(self._delete)

    def _run(self, step):
        async def with_channel():
            connection = await aio_pika.connect(self.consumer_url, timeout=WAIT_SECONDS)
            async with connection:
                return await step(await connection.channel())

        return asyncio.run(with_channel())

    async def _declare_exchange(self, channel) -> None:
        await channel.declare_exchange(self.exchange, aio_pika.ExchangeType.DIRECT)

    async def _bind(self, channel) -> None:
        queue = await channel.declare_queue(self.queue)
        await queue.bind(self.exchange, self.target["routing_key"])

    async def _drain(self, channel) -> list[Message]:
        queue = await channel.declare_queue(self.queue, passive=True)
        found = []
        while got := await queue.get(no_ack=True, fail=False, timeout=WAIT_SECONDS):
            headers = {name: _text(value) for name, value in got.headers.items()}
            found.append(Message(headers, got.body))
        return found

    async def _delete(self, channel) -> None:
        await channel.queue_delete(self.queue)
        await channel.exchange_delete(self.exchange)


class JetStreamNoStream:
    """A subject no stream listens to; fix() adds a (memory) stream for it."""

    kind = brokers.NATS
    failure = ErrorKind.BROKER_REFUSED  # no stream: nobody to acknowledge
    consumer_url = f"nats://{HOST}:{NATS_PORT}"

    def __init__(self) -> None:
        name = uuid.uuid4().hex[:12]
        self.stream = f"RELAYTEST_{name}"
        self.subject = f"relaytest.{name}"
        self.url = self.consumer_url
        self.target = {"subject": self.subject}

    def fix(self) -> None:
        self._run(self._add_stream)

    def messages(self, at_least: int = 0) -> list[Message]:
        return self._run(self._read)

    def close(self) -> None:
        self._run(self._delete)

    def _run(self, step):
        async def with_jetstream():
            client = await nats.connect(self.consumer_url, connect_timeout=WAIT_SECONDS)
            try:
                return await step(client.jetstream(timeout=WAIT_SECONDS))
            finally:
                await client.close()

        return asyncio.run(with_jetstream())

    async def _add_stream(self, js) -> None:
        await js.add_stream(
            StreamConfig(
                name=self.stream, subjects=[self.subject], storage=StorageType.MEMORY
            )
        )

    async def _read(self, js) -> list[Message]:
        try:
            state = (await js.stream_info(self.stream)).state
        except NotFoundError:
            return []  # not fixed yet: nothing could be kept
        if not state.messages:
            return []
        found = []
        for sequence in range(state.first_seq, state.last_seq + 1):
            raw = await js.get_msg(self.stream, sequence)
            found.append(Message(dict(raw.headers or {}), raw.data or b""))
        return found

    async def _delete(self, js) -> None:
        with contextlib.suppress(NotFoundError):  # never fixed: no stream
            await js.delete_stream(self.stream)


class RedisWrongType:
    """A key holding a string, so XADD answers WRONGTYPE; fix() deletes it."""

    kind = brokers.REDIS
    failure = ErrorKind.BROKER_REFUSED
    consumer_url = f"redis://{HOST}:{REDIS_PORT}/0"

    def __init__(self) -> None:
        self.key = unique_name("relay-test-stream")
        self.url = self.consumer_url
        self.target = {"stream": self.key}
        self._redis = redis.Redis(host=HOST, port=REDIS_PORT, db=0)
        self._redis.set(self.key, "not a stream")

    def fix(self) -> None:
        self._redis.delete(self.key)

    def messages(self, at_least: int = 0) -> list[Message]:
        if self._redis.type(self.key) != b"stream":
            return []
        found = []
        for _entry_id, fields in self._redis.xrange(self.key):
            body = fields.pop(b"body")
            headers = {_text(name): _text(value) for name, value in fields.items()}
            found.append(Message(headers, body))
        return found

    def close(self) -> None:
        self._redis.delete(self.key)
        self._redis.close()


class MqttCut:
    """The MQTT broker behind a TcpProxy that is cut: the endpoint's URL
    names the proxy. A subscriber on the broker itself (QoS 1, MQTT 5) takes
    what arrives; fix() resumes the proxy."""

    kind = brokers.MQTT
    failure = ErrorKind.CONNECTION

    def __init__(self) -> None:
        self.topic = f"relay-test/{uuid.uuid4().hex[:12]}"
        self.target = {"topic": self.topic}
        self.proxy = TcpProxy((HOST, MQTT_PORT))
        self.proxy.cut()
        self.url = f"mqtt://{HOST}:{self.proxy.port}"
        self._arrived = threading.Condition()
        self._received: list[Message] = []
        self._subscribed = threading.Event()
        self._client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=unique_name("relay-test"),
            protocol=mqtt.MQTTv5,
        )
        self._client.on_connect = self._on_connect
        self._client.on_subscribe = lambda *_args: self._subscribed.set()
        self._client.on_message = self._on_message
        self._client.connect(HOST, MQTT_PORT)
        self._client.loop_start()
        if not self._subscribed.wait(WAIT_SECONDS):
            self.close()
            raise AssertionError("the MQTT subscriber was not subscribed in time")

    def fix(self) -> None:
        self.proxy.resume()

    def messages(self, at_least: int = 0) -> list[Message]:
        # A PUBACK says the broker has the message, not that it reached us.
        with self._arrived:
            self._arrived.wait_for(
                lambda: len(self._received) >= at_least, timeout=WAIT_SECONDS
            )
            return list(self._received)

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()
        self.proxy.__exit__(None, None, None)

    def _on_connect(self, client, _userdata, _flags, _reason, _properties) -> None:
        client.subscribe(self.topic, qos=1)

    def _on_message(self, _client, _userdata, message) -> None:
        properties = getattr(message.properties, "UserProperty", None) or []
        with self._arrived:
            self._received.append(Message(dict(properties), message.payload))
            self._arrived.notify_all()


TARGETS = {
    target.kind: target
    for target in (RabbitUnbound, JetStreamNoStream, RedisWrongType, MqttCut)
}
