"""Broker destinations on the send path (issue 41): one sender per kind behind
the one Sender the send loop knows.

KindSender sends an http request with the HTTP sender and a broker request
with its kind's BrokerSender, which it imports the first time that kind is
sent (so a dispatcher with no broker endpoints never loads a broker client,
and the web process never does). Everything a broker send shares lives here:
the operator's host policy judged at send (endpoints.brokers, the addresses
pinned from the same bounded resolver as HTTP), one deadline per attempt
whatever the broker does, and the mapping of what went wrong to an error
kind and a sentence in which no credential can appear.

A BrokerSender publishes a BrokerMessage and returns what the broker
acknowledged (text for the attempt), or raises BrokerFailure with an error
kind; any other exception is judged here (TLS, connection). It writes
nothing, and drops a pooled connection it can no longer trust (forget()).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from deliveries.dispatch.resolver import DNS_TIMEOUT_SECONDS, CheckedAddresses
from deliveries.dispatch.transport import OutgoingRequest, SendResult, wire_headers
from deliveries.models import ErrorKind
from endpoints import brokers, destinations

# Connections kept open per kind per dispatcher (each to one broker, user and
# pinned address); the least recently used is closed past it.
CONNECTIONS_PER_KIND = 64
# kind -> the module whose BrokerSender sends it (imported on first use).
MODULES = {
    brokers.RABBITMQ: "deliveries.dispatch.brokers.rabbitmq",
    brokers.NATS: "deliveries.dispatch.brokers.jetstream",
    brokers.REDIS: "deliveries.dispatch.brokers.redis_streams",
    brokers.MQTT: "deliveries.dispatch.brokers.mqtt",
}

CLIENT_NAMES = {
    brokers.RABBITMQ: "RabbitMQ",
    brokers.NATS: "NATS",
    brokers.REDIS: "Redis",
    brokers.MQTT: "MQTT",
}


@dataclass(frozen=True)
class BrokerMessage:
    """One publish: where (already judged and pinned), what, and as whom."""

    kind: str
    host: str  # the URL's host: TLS checks the certificate against it (and SNI)
    address: str  # the pinned address to dial (checked by the policy)
    port: int
    tls: bool
    path: str  # the AMQP vhost, or the Redis database number; "" for none
    target: Mapping[str, object]
    headers: dict[str, str]  # the Standard Webhooks and X-Relay-* headers as sent
    body: bytes  # exactly the bytes an HTTP endpoint gets
    timeout: float  # the attempt's deadline: connect and publish within it
    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def pool_key(self) -> tuple:
        """Connections are shared by messages with the same key only."""
        return (
            self.kind,
            self.host,
            self.address,
            self.port,
            self.tls,
            self.path,
            self.user,
            self.password,
        )


class BrokerFailure(Exception):
    """The broker (or the way to it) refused the message: a failed attempt."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class BrokerSender(Protocol):
    async def publish(self, message: BrokerMessage) -> str:
        """Publish and wait for the broker's acknowledgement; its words."""

    async def forget(self, message: BrokerMessage) -> None:
        """Close the pooled connection message would use (after a timeout)."""

    async def close(self) -> None: ...


class KindSender:
    """The dispatcher's sender: http to `http`, each broker kind to its own."""

    keeps_deadline = True  # every broker send is under asyncio.timeout here

    def __init__(
        self,
        *,
        http,
        timeout: float,
        allow_private: bool,
        resolve: destinations.Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        senders: Mapping[str, BrokerSender] | None = None,
    ) -> None:
        self.http = http
        self.timeout = timeout
        self.allow_private = allow_private
        self.ssl_context = ssl_context
        self.monotonic = monotonic
        self._senders: dict[str, BrokerSender] = dict(senders or {})
        # The same bounded, per-merchant lookups as HTTP; the broker policy
        # (not the HTTP one) judges what they return.
        self._addresses = CheckedAddresses(
            allow_private=True,
            resolve=resolve,
            lookup_timeout=min(DNS_TIMEOUT_SECONDS, timeout / 2),
        )

    async def send(self, request: OutgoingRequest) -> SendResult:
        if request.kind == brokers.HTTP:
            return await self.http.send(request)
        started = self.monotonic()

        def failed(kind: str, text: str) -> SendResult:
            ms = (self.monotonic() - started) * 1000
            return SendResult(None, ms, kind, scrubbed(text, request.credentials)[:500])

        message = None
        timeout = request.timeout or self.timeout  # the endpoint's, else ours
        try:
            async with asyncio.timeout(timeout):
                message = await self._message(request, timeout)
                sender = self._sender(request.kind)
                answer = await sender.publish(message)
        except TimeoutError:
            if message is not None:
                await self._forget(message)
            return failed(
                ErrorKind.TIMEOUT,
                f"the broker did not acknowledge within {timeout:g} s",
            )
        except asyncio.CancelledError:
            raise
        except destinations.DestinationRefused as refused:
            kind = (
                ErrorKind.DNS
                if refused.code == ErrorKind.DNS
                else ErrorKind.DESTINATION_BLOCKED
            )
            return failed(kind, refused.reason)
        except BrokerFailure as failure:
            return failed(failure.kind, failure.message)
        except ssl.SSLError as exc:
            if message is not None:
                await self._forget(message)
            reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
            return failed(ErrorKind.TLS, f"the TLS handshake failed: {reason}")
        except ConnectionRefusedError:
            return failed(
                ErrorKind.CONNECTION, f"Connection refused ({_where(message)})"
            )
        except Exception as exc:  # a broker must never crash a dispatcher  # noqa: BLE001
            if message is not None:
                await self._forget(message)
            return failed(ErrorKind.CONNECTION, f"{type(exc).__name__}: {exc}")
        return SendResult(
            status_code=None,
            duration_ms=(self.monotonic() - started) * 1000,
            body_excerpt=scrubbed(answer, request.credentials)[:500],
            acknowledged=True,
        )

    async def _message(self, request: OutgoingRequest, timeout: float) -> BrokerMessage:
        parts = _url_parts(request.kind, request.url)
        if brokers.host_allowed(parts.host, parts.port, request.broker_hosts):
            looked_up = await self._addresses(parts.host, parts.port, request.tenant)
        else:
            looked_up = []  # refused below, without a lookup
        addresses = brokers.check_broker_host(
            parts.host,
            parts.port,
            patterns=request.broker_hosts,
            allow_private=self.allow_private,
            addresses=looked_up,
        )
        user, password = brokers.credentials_split(request.credentials)
        return BrokerMessage(
            kind=request.kind,
            host=parts.host,
            address=addresses[0],
            port=parts.port,
            tls=parts.tls,
            path=parts.path,
            target=request.target,
            headers=wire_headers(request),
            body=request.body,
            timeout=timeout,
            user=user,
            password=password,
            ssl_context=self.ssl_context,
        )

    def _sender(self, kind: str) -> BrokerSender:
        sender = self._senders.get(kind)
        if sender is None:
            try:
                module = importlib.import_module(MODULES[kind])
            except ImportError as missing:
                raise BrokerFailure(
                    ErrorKind.CONNECTION,
                    f"this dispatcher has no {CLIENT_NAMES[kind]} client "
                    f"({missing.name} is not installed: pip install "
                    "'webhook-relay[brokers]')",
                ) from None
            sender = self._senders[kind] = module.Sender(limit=CONNECTIONS_PER_KIND)
        return sender

    async def _forget(self, message: BrokerMessage) -> None:
        sender = self._senders.get(message.kind)
        if sender is not None:
            try:
                await sender.forget(message)
            except Exception:  # noqa: BLE001, S110 - closing a dead link may fail too
                pass

    async def close(self) -> None:
        await self.http.close()
        for sender in self._senders.values():
            await sender.close()
        self._addresses.close()


@functools.lru_cache(maxsize=4096)
def _url_parts(kind: str, url: str) -> brokers.BrokerURL:
    """The stored URL (credential-free) split once per process, not per send,
    as transport.target_of does for HTTP; a malformed one raises each time."""
    return brokers.broker_url_split(kind, url)


def scrubbed(text: str, credentials: str) -> str:
    """text with the broker URL's user:password, and the password alone,
    replaced: a client library may quote either in an error."""
    if not credentials:
        return text
    user, password = brokers.credentials_split(credentials)
    for secret in (credentials, password, credentials.partition(":")[2]):
        if secret:
            text = text.replace(secret, "***")
    return text


def _where(message: BrokerMessage | None) -> str:
    return "the broker" if message is None else f"{message.host}:{message.port}"
