"""Redis Streams destinations (issue 41): one XADD per message.

A success is the entry id XADD returns: Redis has appended the entry to the
stream. The entry carries the body bytes in field `body` and each header as
a field of its own, named in lower case; a target with `maxlen` trims the
stream with MAXLEN ~ (approximate), which Redis does cheaply, a whole node
of entries at a time, so the stream may hold a little more than `maxlen`.

The client is redis-py (`redis`), maintained by Redis itself, through its
asyncio API: one Redis client per broker, database and user, each with a
small connection pool of its own, with redis-py's retries off so one send is
one attempt.
"""

from __future__ import annotations

import ssl
from collections import OrderedDict
from dataclasses import dataclass

from redis.asyncio import BlockingConnectionPool, Connection, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    RedisError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from deliveries.dispatch.brokers import BrokerFailure, BrokerMessage
from deliveries.models import ErrorKind

# Sockets one client keeps to its Redis; a send past them waits for one,
# within the attempt's deadline.
CONNECTIONS_PER_CLIENT = 8
# RESP2, not redis-py 8's default RESP3: every Redis with streams (5.0+)
# speaks it, and it authenticates a password alone with AUTH <password>,
# which a server without a password refuses. RESP3 opens with HELLO ... AUTH
# default <password>, which such a server accepts whatever the password, so
# a wrong password would go unnoticed.
PROTOCOL = 2


class PinnedConnection(Connection):
    """A connection to the pinned address that, with TLS, checks the
    certificate against the URL's host and sends it as SNI.

    redis-py's SSLConnection can do neither when it dials an IP: it takes
    the name to check from the address it connects to, and builds its own
    SSLContext. Connection._connection_arguments is the hook SSLConnection
    itself uses to add its context; this adds ours and the host name."""

    def __init__(
        self,
        *,
        tls_context: ssl.SSLContext | None = None,
        server_hostname: str = "",
        **kwargs,
    ) -> None:
        self.tls_context = tls_context
        self.server_hostname = server_hostname
        super().__init__(**kwargs)

    def _connection_arguments(self) -> dict:
        arguments = dict(super()._connection_arguments())
        if self.tls_context is not None:
            arguments["ssl"] = self.tls_context
            arguments["server_hostname"] = self.server_hostname
        return arguments


@dataclass
class _Pooled:
    client: Redis
    sending: int = 0  # publishes under way on this client
    retired: bool = False  # out of the pool: closed when its last publish ends


class Sender:
    """XADDs to Redis streams, keeping at most `limit` clients (LRU)."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._pool: OrderedDict[tuple, _Pooled] = OrderedDict()

    async def publish(self, message: BrokerMessage) -> str:
        stream = str(message.target["stream"])
        maxlen = message.target.get("maxlen")
        # The body wins over a header that happens to be called "body".
        fields: dict[str, bytes | str] = {"body": message.body}
        for name, value in message.headers.items():
            fields.setdefault(name.lower(), value)
        pooled, evicted = self._checkout(message)
        try:
            for old in evicted:
                await _close(old)
            entry_id = await pooled.client.xadd(
                stream, fields, id="*", maxlen=maxlen, approximate=True
            )
        except ResponseError as exc:
            # Redis answered the command, so nothing is left unread on the
            # connection: the client stays in the pool.
            raise _failure(exc, message) from None
        except BaseException as exc:
            # Cut, timed out or cancelled mid-command: what the connection
            # holds is unknown, so its client is not used again.
            self._retire(message.pool_key, pooled)
            if isinstance(exc, RedisError):
                raise _failure(exc, message) from None
            raise
        finally:
            pooled.sending -= 1
            if pooled.retired and pooled.sending == 0:
                await _close(pooled)
        return f"XADD id {_text(entry_id)} (stream {stream!r})"

    async def forget(self, message: BrokerMessage) -> None:
        pooled = self._pool.get(message.pool_key)
        if pooled is not None:
            self._retire(message.pool_key, pooled)
            if pooled.sending == 0:
                await _close(pooled)

    async def close(self) -> None:
        pooled_clients = list(self._pool.values())
        self._pool.clear()
        for pooled in pooled_clients:
            pooled.retired = True
            await _close(pooled)

    def _checkout(self, message: BrokerMessage) -> tuple[_Pooled, list[_Pooled]]:
        """The client for message, counted as sending, and the clients pushed
        out of the pool by it that are now idle (the caller closes them)."""
        key = message.pool_key
        pooled = self._pool.get(key)
        if pooled is None:
            pooled = self._pool[key] = _Pooled(_client(message))
        self._pool.move_to_end(key)
        pooled.sending += 1
        evicted = []
        while len(self._pool) > self.limit:
            oldest_key, oldest = next(iter(self._pool.items()))
            # A client with publishes under way is only retired: the last of
            # them closes it.
            self._retire(oldest_key, oldest)
            if oldest.sending == 0:
                evicted.append(oldest)
        return pooled, evicted

    def _retire(self, key: tuple, pooled: _Pooled) -> None:
        pooled.retired = True
        if self._pool.get(key) is pooled:
            del self._pool[key]


def _client(message: BrokerMessage) -> Redis:
    tls_context = None
    if message.tls:
        tls_context = message.ssl_context or ssl.create_default_context()
    pool = BlockingConnectionPool(
        connection_class=PinnedConnection,
        max_connections=CONNECTIONS_PER_CLIENT,
        timeout=message.timeout,  # waiting for a free socket
        host=message.address,
        port=message.port,
        db=int(message.path or 0),
        username=message.user or None,
        password=message.password or None,
        protocol=PROTOCOL,
        socket_connect_timeout=message.timeout,
        socket_timeout=message.timeout,
        retry_on_timeout=False,
        retry=Retry(NoBackoff(), 0),  # one send, one attempt: no redial, no resend
        tls_context=tls_context,
        server_hostname=message.host,
    )
    return Redis.from_pool(pool)


async def _close(pooled: _Pooled) -> None:
    try:
        await pooled.client.aclose()
    except Exception:  # noqa: BLE001, S110 - closing a dead link may fail too
        pass


def _failure(exc: RedisError, message: BrokerMessage) -> BrokerFailure:
    """What went wrong, in the broker's words where it answered."""
    reply = _reply(exc)
    if isinstance(exc, (NoPermissionError, AuthenticationError, AuthorizationError)):
        return BrokerFailure(ErrorKind.BROKER_AUTH, f"Redis refused the user: {reply}")
    if isinstance(exc, ResponseError) or exc.status_code:
        # WRONGTYPE (the key is not a stream), OOM, READONLY, LOADING, ...
        return BrokerFailure(ErrorKind.BROKER_REFUSED, f"Redis answered: {reply}")
    tls_error = _ssl_error(exc)
    if tls_error is not None:
        reason = (
            getattr(tls_error, "verify_message", None)
            or tls_error.reason
            or str(tls_error)
        )
        return BrokerFailure(
            ErrorKind.TLS, f"the TLS handshake with {message.host} failed: {reason}"
        )
    if isinstance(exc, RedisTimeoutError):
        return BrokerFailure(
            ErrorKind.TIMEOUT,
            f"Redis did not answer within {message.timeout:g} s ({exc})",
        )
    return BrokerFailure(ErrorKind.CONNECTION, f"the connection to Redis failed: {exc}")


def _reply(exc: RedisError) -> str:
    # redis-py strips the error code (WRONGPASS, NOPERM, ...) off the replies
    # it has a class for and keeps it in status_code; put it back.
    text = str(exc)
    code = exc.status_code
    if code and not text.startswith(code):
        text = f"{code} {text}"
    return text


def _ssl_error(exc: BaseException) -> ssl.SSLError | None:
    # redis-py wraps a failed handshake in its own ConnectionError.
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _text(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id
