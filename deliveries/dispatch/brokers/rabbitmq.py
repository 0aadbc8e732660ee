"""RabbitMQ destinations: publish one signed message to an exchange, and count
it delivered only when the broker confirms it.

A success is a publisher confirm (Basic.Ack) for a message published
`mandatory`: a message RabbitMQ can route to no queue comes back (Basic.Return)
and is a failure, not a silent drop. A Basic.Nack, a channel the broker closes
(no such exchange, access refused) or a refused login is a failure carrying the
broker's own words.

aio-pika (over aiormq) is the asyncio client the RabbitMQ community maintains:
it speaks publisher confirms and returns natively, and lets the sender dial the
pinned address while TLS checks the certificate against the URL's host.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aio_pika
import aiormq.exceptions
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    ConnectionParameter,
    DeliveryMode,
)
from aio_pika.connection import make_url

from deliveries.dispatch.brokers import BrokerFailure, BrokerMessage
from deliveries.models import ErrorKind

# A retired connection is closed in the background (its broker may hang, and
# closing must not spend another send's deadline); its goodbye is awaited this
# long, then given up.
CLOSE_SECONDS = 2.0
# The AMQP URI spec's default login, used when the broker URL names no user.
DEFAULT_LOGIN = ("guest", "guest")


class PinnedConnection(aio_pika.Connection):
    """A connection that dials the pinned address but sends the URL's host as
    TLS server name and checks the certificate against it, never the IP."""

    PARAMETERS = (
        *aio_pika.Connection.PARAMETERS,
        ConnectionParameter(name="server_hostname", parser=str, is_kwarg=True),
    )


@dataclass(eq=False)
class _Link:
    """One pooled connection with its confirming channel, shared by every send
    with the same pool key."""

    connection: AbstractConnection | None = None
    channel: AbstractChannel | None = None
    users: int = 0  # sends holding it now: it is not evicted under them
    retired: bool = False  # out of the pool: closed once its last user leaves
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # message id -> [lock, holders]. aiormq matches a returned message to its
    # publish by message id, so two publishes of one event in flight at once on
    # one channel (two endpoints with the same broker) would get each other's
    # answer; the second waits for the first instead.
    ids: dict[str, list] = field(default_factory=dict)


class Sender:
    """Publishes to RabbitMQ, one pooled connection per broker, user and vhost."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._links: OrderedDict[tuple, _Link] = OrderedDict()  # oldest use first
        self._closing: set[asyncio.Task] = set()
        self._default_tls: ssl.SSLContext | None = None

    async def publish(self, message: BrokerMessage) -> str:
        exchange = str(message.target.get("exchange") or "")
        routing_key = str(message.target.get("routing_key") or "")
        where = _where(exchange, routing_key)
        link = await self._link(message)
        try:
            async with _alone_with_id(link, message.headers.get("webhook-id", "")):
                channel = await self._channel(link, message)
                amqp_exchange = await channel.get_exchange(exchange, ensure=False)
                await amqp_exchange.publish(
                    aio_pika.Message(
                        message.body,
                        headers=dict(message.headers),
                        content_type="application/json",
                        message_id=message.headers.get("webhook-id") or None,
                        delivery_mode=DeliveryMode.PERSISTENT,
                    ),
                    routing_key,
                    mandatory=True,
                    timeout=message.timeout,
                )
        except aiormq.exceptions.PublishError as returned:
            # The broker acks a returned message after returning it: the link
            # is sound, the message went nowhere.
            reason = getattr(returned.frame, "reply_text", "") or "returned"
            raise BrokerFailure(
                ErrorKind.BROKER_REFUSED,
                f"RabbitMQ returned the message: {reason} ({where})",
            ) from None
        except aiormq.exceptions.DeliveryError as refused:
            answer = getattr(refused.frame, "name", "a refusal")
            raise BrokerFailure(
                ErrorKind.BROKER_REFUSED,
                f"RabbitMQ did not take the message: it answered {answer} ({where})",
            ) from None
        except aiormq.exceptions.ChannelClosed as closed:
            if not _is_open(link.connection):
                self._drop(message.pool_key, link)
                raise _connection_failure(closed, message) from None
            link.channel = None  # the broker closed it; the next send opens another
            raise _channel_failure(closed, where) from None
        except BrokerFailure:
            raise
        except BaseException as exc:
            # A connection failure, a cancellation or a timeout: whether the
            # broker has this message, and what the channel owes, is unknown.
            self._drop(message.pool_key, link)
            if isinstance(exc, Exception) and not isinstance(exc, TimeoutError):
                raise _connection_failure(exc, message) from None
            raise
        finally:
            self._release(link)
        return f"publisher confirm: ack ({where})"

    async def forget(self, message: BrokerMessage) -> None:
        link = self._links.get(message.pool_key)
        if link is not None:
            self._drop(message.pool_key, link)

    async def close(self) -> None:
        for key, link in list(self._links.items()):
            self._drop(key, link)
        await self.settled()

    async def settled(self) -> None:
        """Wait until the connections being closed in the background are."""
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _link(self, message: BrokerMessage) -> _Link:
        """The pooled link for message, connected, with one more user."""
        key = message.pool_key
        while True:
            link = self._links.get(key)
            if link is None:
                link = self._links[key] = _Link()
            self._links.move_to_end(key)
            link.users += 1
            try:
                async with link.lock:  # one dial per key, however many wait
                    if not link.retired:
                        if not _is_open(link.connection):
                            self._close_later(link)  # what is left of a lost one
                            link.connection = await self._connect(message)
                        self._evict()
                        return link
            except BaseException as exc:
                self._release(link)
                self._drop(key, link)
                if isinstance(exc, Exception) and not isinstance(exc, TimeoutError):
                    raise _connection_failure(exc, message) from None
                raise
            # Dropped while this send waited for the dial: go round for the new one.
            self._release(link)

    async def _connect(self, message: BrokerMessage) -> AbstractConnection:
        user, password = (
            (message.user, message.password) if message.user else DEFAULT_LOGIN
        )
        url = make_url(
            host=message.address,
            port=message.port,
            login=user,
            password=password,
            virtualhost=message.path or "/",
            ssl=message.tls,
        )
        options = {}
        if message.tls:
            options["ssl_context"] = message.ssl_context or self._tls_context()
            options["server_hostname"] = message.host
        connection = PinnedConnection(url, **options)
        try:
            await connection.connect(timeout=message.timeout)
        except BaseException:
            # aiormq has closed the socket; this marks the object closed too,
            # so it is not closed again, unawaited, when collected.
            await asyncio.shield(connection.close())
            raise
        return connection

    async def _channel(self, link: _Link, message: BrokerMessage) -> AbstractChannel:
        async with link.lock:
            if link.channel is None or link.channel.is_closed:
                if not _is_open(link.connection):
                    raise ConnectionError("the connection to RabbitMQ was closed")
                link.channel = link.connection.channel(
                    publisher_confirms=True, on_return_raises=True
                )
                await link.channel.initialize(timeout=message.timeout)
            return link.channel

    def _tls_context(self) -> ssl.SSLContext:
        if self._default_tls is None:
            self._default_tls = ssl.create_default_context()
        return self._default_tls

    def _release(self, link: _Link) -> None:
        link.users -= 1
        if link.retired and link.users == 0:
            self._close_later(link)
        elif link.users == 0:
            self._evict()

    def _evict(self) -> None:
        """Close the least recently used idle links past the limit; a link in
        use is closed when its last send is done."""
        for key, link in list(self._links.items()):
            if len(self._links) <= self.limit:
                return
            if link.users == 0:
                self._drop(key, link)

    def _drop(self, key: tuple, link: _Link) -> None:
        """Stop sharing link, and close it: nothing more is sent on it."""
        if self._links.get(key) is link:
            del self._links[key]
        link.retired = True
        self._close_later(link)

    def _close_later(self, link: _Link) -> None:
        connection, link.connection, link.channel = link.connection, None, None
        if connection is None:
            return
        task = asyncio.get_running_loop().create_task(_close_quietly(connection))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


@contextlib.asynccontextmanager
async def _alone_with_id(link: _Link, message_id: str) -> AsyncIterator[None]:
    entry = link.ids.setdefault(message_id, [asyncio.Lock(), 0])
    entry[1] += 1
    try:
        async with entry[0]:
            yield
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            del link.ids[message_id]


def _is_open(connection: AbstractConnection | None) -> bool:
    # aio-pika's own is_closed stays False when the broker drops the
    # connection; aiormq's underneath knows.
    transport = connection.transport if connection is not None else None
    return transport is not None and not transport.connection.is_closed


async def _close_quietly(connection: AbstractConnection) -> None:
    with contextlib.suppress(Exception, TimeoutError):
        await asyncio.wait_for(connection.close(), CLOSE_SECONDS)


def _where(exchange: str, routing_key: str) -> str:
    named = f"exchange {exchange!r}" if exchange else "the default exchange"
    return f"{named}, routing key {routing_key!r}"


def _channel_failure(
    closed: aiormq.exceptions.ChannelClosed, where: str
) -> BrokerFailure:
    said = _broker_words(closed)
    if isinstance(closed, aiormq.exceptions.ChannelAccessRefused):
        return BrokerFailure(ErrorKind.BROKER_AUTH, f"RabbitMQ: {said} ({where})")
    return BrokerFailure(
        ErrorKind.BROKER_REFUSED, f"RabbitMQ closed the channel: {said} ({where})"
    )


def _connection_failure(exc: BaseException, message: BrokerMessage) -> BrokerFailure:
    """What went wrong reaching RabbitMQ, in words that name no password."""
    broker = f"RabbitMQ at {message.host}:{message.port}"
    login = message.user or DEFAULT_LOGIN[0]
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLError):  # aiormq wraps the handshake's OSError
        reason = getattr(cause, "verify_message", None) or cause.reason or str(cause)
        return BrokerFailure(
            ErrorKind.TLS, f"the TLS handshake with {broker} failed: {reason}"
        )
    if isinstance(
        exc,
        aiormq.exceptions.ProbableAuthenticationError
        | aiormq.exceptions.AuthenticationError,
    ):
        return BrokerFailure(
            ErrorKind.BROKER_AUTH,
            f"{broker} refused the login of user {login!r}: {_broker_words(exc)}",
        )
    if isinstance(
        exc, aiormq.exceptions.InvalidFrameError
    ) and "Connection.Close" in str(exc):
        # RabbitMQ closes the connection instead of opening the vhost; aiormq
        # keeps only the frame's name, not the broker's sentence.
        return BrokerFailure(
            ErrorKind.BROKER_REFUSED,
            f"{broker} refused to open virtual host {message.path or '/'!r} for "
            f"user {login!r}: it does not exist, or the user may not use it",
        )
    if isinstance(exc, aiormq.exceptions.IncompatibleProtocolError):
        return BrokerFailure(
            ErrorKind.CONNECTION,
            f"{broker} closed the connection before the AMQP handshake finished",
        )
    if isinstance(cause, ConnectionRefusedError) or isinstance(
        exc, ConnectionRefusedError
    ):
        return BrokerFailure(ErrorKind.CONNECTION, f"{broker} refused the connection")
    if isinstance(exc, aiormq.exceptions.AMQPError):  # their words say what happened
        return BrokerFailure(
            ErrorKind.CONNECTION,
            f"the connection to {broker} failed: {_broker_words(exc)}",
        )
    return BrokerFailure(
        ErrorKind.CONNECTION,
        f"the connection to {broker} failed: {type(exc).__name__}: {_broker_words(exc)}",
    )


def _broker_words(exc: BaseException) -> str:
    """The broker's sentence when the exception carries one, else its text."""
    args = [a for a in exc.args if isinstance(a, str)]
    return args[-1] if args else (str(exc) or type(exc).__name__)
