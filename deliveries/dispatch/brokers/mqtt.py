"""MQTT destinations (issue 41): one QoS 1 PUBLISH per message.

A success is the broker's PUBACK with a reason code below 0x80: the broker
has taken the message (0x10, no matching subscribers, included: MQTT keeps
nothing for absent subscribers, so a topic nobody listens to is the
merchant's choice, not a refusal). The message goes as MQTT 5: the body
bytes as the payload, each header as a user property and the content type
as the content-type property. MQTT 3.1.1 has no headers, so a broker that
does not speak 5 gets nothing and the attempt fails as broker_refused.

The client is aiomqtt (asyncio over paho-mqtt, the Eclipse project's
client): it ties paho's socket to the event loop. Three things it does not
do are done here, in Connection: it dials with a blocking connect on a
thread (which a deadline cannot stop, and which could only check the
certificate against the address it dials), so we dial the pinned address
and shake hands on the event loop and give paho the open socket; it drops
the PUBACK's reason code, which decides success; and it waits out its
timeout when the broker closes the connection before CONNACK. That reaches
into aiomqtt 2.5.1 and paho-mqtt 2.2.0, pinned in requirements.txt; the
tests beside this module exercise every such place.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import uuid
from collections import OrderedDict

import aiomqtt
import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from deliveries.dispatch.brokers import BrokerFailure, BrokerMessage
from deliveries.models import ErrorKind

KEEPALIVE_SECONDS = 30  # an idle pooled connection pings this often; a dead one ends
CLOSE_SECONDS = 2.0  # the longest close() waits for a broker to take DISCONNECT
QOS = 1
NO_MATCHING_SUBSCRIBERS = 0x10
UNSUPPORTED_PROTOCOL_VERSION = 0x84
# CONNACK and PUBACK reason codes that are about who we are, not the message:
# bad user name or password, not authorised, bad authentication method.
AUTH_REFUSALS = frozenset({0x86, 0x87, 0x8C})
NOT_MQTT_5 = "the broker does not speak MQTT 5, which carries the signature headers"


class Connection(aiomqtt.Client):
    """One MQTT 5 connection over a socket already dialled, on which any
    number of publishes wait for their own PUBACK."""

    def __init__(self, message: BrokerMessage, dialled: socket.socket) -> None:
        super().__init__(
            message.host,
            message.port,
            username=message.user or None,
            password=message.password or None,
            # Unique per connection: a broker drops the older of two clients
            # with one id, which would cut another dispatcher's connection.
            identifier=f"relay-{uuid.uuid4().hex[:17]}",
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=True,
            keepalive=KEEPALIVE_SECONDS,
            timeout=message.timeout,
        )
        self._dialled: socket.socket | None = dialled
        # paho's connect() asks for its socket here; ours is open already.
        self._client._create_socket = self._hand_over
        self._connack: asyncio.Future[ReasonCode | None] = self._loop.create_future()
        self._pubacks: dict[int, asyncio.Future[ReasonCode | None]] = {}
        self._ended = asyncio.Event()
        self.ended_because = ""
        self._disconnected.add_done_callback(self._lost)

    @property
    def alive(self) -> bool:
        return not self._ended.is_set()

    async def open(self) -> None:
        """Send CONNECT and wait for the broker's CONNACK."""
        # No blocking call: the socket is open, and paho only queues CONNECT.
        self._client.connect(
            self._hostname, self._port, self._keepalive, clean_start=True
        )
        reason = await self._connack
        if reason is None:
            raise BrokerFailure(
                ErrorKind.CONNECTION,
                f"{self.ended_because} before the broker answered CONNECT",
            )
        connack_check(reason)

    async def publish_acknowledged(
        self, topic: str, body: bytes, properties: Properties
    ) -> ReasonCode:
        """Publish at QoS 1; the PUBACK's reason code."""
        if not self.alive:
            raise BrokerFailure(ErrorKind.CONNECTION, self.ended_because)
        info = self._client.publish(topic, body, QOS, False, properties)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise BrokerFailure(
                ErrorKind.CONNECTION,
                f"the client could not publish: {paho.error_string(info.rc)}",
            )
        # The PUBACK is read on this loop, so it cannot come before this line.
        acked = self._pubacks[info.mid] = self._loop.create_future()
        try:
            reason = await acked
        finally:
            self._pubacks.pop(info.mid, None)
        if reason is None:
            raise BrokerFailure(
                ErrorKind.CONNECTION, f"{self.ended_because} before the PUBACK"
            )
        return reason

    async def close_gracefully(self) -> None:
        """DISCONNECT, then close; at once if the broker does not take it."""
        try:
            if self.alive and self._connected.done():
                self._client.disconnect()  # paho closes once DISCONNECT is written
                async with asyncio.timeout(CLOSE_SECONDS):
                    await self._ended.wait()
        except TimeoutError:
            pass
        finally:
            self.close_now()

    def close_now(self) -> None:
        """Close the socket with no goodbye: the way to drop a connection in
        an unknown state. Synchronous, so it runs even as a task is cancelled.

        paho's _sock_close() also unregisters the socket from the loop and
        stops aiomqtt's keepalive task (its on_socket_close). Those were
        registered with call_soon by connect(), whose caller awaited (so let
        them run) before anything could bring it here."""
        self._client._sock_close()
        if self._dialled is not None:  # never handed to paho
            self._dialled.close()
            self._dialled = None
        self._end("the relay closed this connection")

    def _hand_over(self) -> socket.socket:
        dialled, self._dialled = self._dialled, None
        if dialled is None:
            raise OSError("this connection's socket was closed")
        return dialled

    def _on_connect(self, client, userdata, flags, reason_code, properties=None):
        if not reason_code.is_failure:
            super()._on_connect(client, userdata, flags, reason_code, properties)
        if not self._connack.done():
            self._connack.set_result(reason_code)

    def _on_disconnect(self, client, userdata, flags, reason_code, properties=None):
        super()._on_disconnect(client, userdata, flags, reason_code, properties)
        if flags.is_disconnect_packet_from_server:
            self._end(f"the broker disconnected: {_named(reason_code)}")
        else:
            self._end("the connection to the broker was lost")

    def _on_publish(self, client, userdata, mid, reason_code, properties):
        acked = self._pubacks.get(mid)
        if acked is not None and not acked.done():
            acked.set_result(reason_code)

    def _lost(self, disconnected: asyncio.Future[None]) -> None:
        # aiomqtt ends the connection here when reading or writing raised.
        if not disconnected.cancelled() and disconnected.exception() is not None:
            self._end(
                f"the connection to the broker failed: {disconnected.exception()}"
            )
        else:
            self._end("the connection to the broker was closed")

    def _end(self, because: str) -> None:
        if self._ended.is_set():
            return
        self.ended_because = because
        self._ended.set()
        # Whoever waits for CONNACK or a PUBACK learns it will not come.
        for waiting in (self._connack, *self._pubacks.values()):
            if not waiting.done():
                waiting.set_result(None)


class Sender:
    """Connections kept per broker, user and pinned address, at most `limit`."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._pool: OrderedDict[tuple, Connection] = OrderedDict()
        self._dialing: dict[tuple, asyncio.Lock] = {}

    async def publish(self, message: BrokerMessage) -> str:
        topic = str(message.target.get("topic", ""))
        connection = await self._connection(message)
        try:
            reason = await connection.publish_acknowledged(
                topic, message.body, _properties(message.headers)
            )
        except BaseException:
            # Lost, or cancelled at the deadline with a PUBACK owed: no
            # other publish may count on this connection's state.
            self._drop(message.pool_key, connection)
            raise
        return puback_answer(topic, reason)

    async def forget(self, message: BrokerMessage) -> None:
        key = message.pool_key
        self._drop(key, self._pool.get(key))

    async def close(self) -> None:
        connections = list(self._pool.values())
        self._pool.clear()
        self._dialing.clear()
        await asyncio.gather(
            *(c.close_gracefully() for c in connections), return_exceptions=True
        )

    async def _connection(self, message: BrokerMessage) -> Connection:
        key = message.pool_key
        connection = self._reusable(key)
        if connection is not None:
            return connection
        # One dial per key at a time: the publishes waiting share its result.
        async with self._dialing.setdefault(key, asyncio.Lock()):
            connection = self._reusable(key)
            if connection is None:
                connection = await _connect(message)
                self._pool[key] = connection
        while len(self._pool) > self.limit:
            self._drop(*next(iter(self._pool.items())))  # the least recently used
        return connection

    def _reusable(self, key: tuple) -> Connection | None:
        connection = self._pool.get(key)
        if connection is not None and not connection.alive:
            self._drop(key, connection)
            return None
        if connection is not None:
            self._pool.move_to_end(key)
        return connection

    def _drop(self, key: tuple, connection: Connection | None) -> None:
        if connection is None:
            return
        connection.close_now()
        if self._pool.get(key) is connection:
            del self._pool[key]
            dialing = self._dialing.get(key)
            if dialing is not None and not dialing.locked():
                del self._dialing[key]


async def _connect(message: BrokerMessage) -> Connection:
    dialled = await _dial(message)
    try:
        connection = Connection(message, dialled)
    except BaseException:
        dialled.close()
        raise
    try:
        await connection.open()
    except BaseException:  # refused, lost, or cancelled at the deadline
        connection.close_now()
        raise
    return connection


async def _dial(message: BrokerMessage) -> socket.socket:
    """A socket connected to the pinned address (with TLS, its handshake
    done and the certificate checked against the URL's host, sent as SNI)."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in message.address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, (message.address, message.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if message.tls:
            context = message.ssl_context or ssl.create_default_context()
            sock = context.wrap_socket(
                sock, server_hostname=message.host, do_handshake_on_connect=False
            )
            await _handshake(sock)
    except BaseException:
        sock.close()
        raise
    return sock


async def _handshake(sock: ssl.SSLSocket) -> None:
    loop = asyncio.get_running_loop()
    while True:
        try:
            sock.do_handshake()
            return
        except ssl.SSLWantReadError:
            watch, unwatch = loop.add_reader, loop.remove_reader
        except ssl.SSLWantWriteError:
            watch, unwatch = loop.add_writer, loop.remove_writer
        ready = loop.create_future()
        watch(sock.fileno(), _settle, ready)
        try:
            await ready
        finally:
            unwatch(sock.fileno())


def _settle(ready: asyncio.Future[None]) -> None:
    if not ready.done():  # the loop may call again before we unwatch
        ready.set_result(None)


def connack_check(reason: ReasonCode) -> None:
    """Raise BrokerFailure unless CONNACK's reason code accepts us."""
    if reason.value == UNSUPPORTED_PROTOCOL_VERSION:
        raise BrokerFailure(ErrorKind.BROKER_REFUSED, NOT_MQTT_5)
    if reason.is_failure:
        raise BrokerFailure(
            _refusal_kind(reason),
            f"the broker refused the connection: CONNACK {_named(reason)}",
        )


def puback_answer(topic: str, reason: ReasonCode) -> str:
    """What the attempt records of a PUBACK, or BrokerFailure if it refuses."""
    where = f"topic {topic!r}, QoS {QOS}"
    if reason.is_failure:
        raise BrokerFailure(
            _refusal_kind(reason),
            f"the broker refused the message: PUBACK {_named(reason)} ({where})",
        )
    if reason.value == NO_MATCHING_SUBSCRIBERS:
        return f"PUBACK ({where}): {_named(reason)}"
    return f"PUBACK ({where})"


def _refusal_kind(reason: ReasonCode) -> str:
    if reason.value in AUTH_REFUSALS:
        return ErrorKind.BROKER_AUTH
    return ErrorKind.BROKER_REFUSED


def _properties(headers: dict[str, str]) -> Properties:
    properties = Properties(PacketTypes.PUBLISH)
    properties.UserProperty = list(headers.items())
    properties.ContentType = next(
        (v for k, v in headers.items() if k.lower() == "content-type"),
        "application/json",
    )
    return properties


def _named(reason: ReasonCode) -> str:
    return f"0x{reason.value:02X} {reason.getName()}"
