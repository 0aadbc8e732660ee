"""NATS JetStream destinations: a success is JetStream's PubAck, the stream
saying it stored the message, never a bare NATS publish (which a server
drops silently when nobody listens).

The client is nats-py, the asyncio client the NATS maintainers publish: it
speaks JetStream and NATS headers, which carry the Standard Webhooks headers
unchanged. Its reconnect loop is turned off: a connection that drops is
closed and forgotten here, and the next attempt dials again, under its own
deadline. Nats-Msg-Id is the delivery's id (X-Relay-Delivery-Id), the same on
every retry and replay of one delivery, so a resend inside the stream's
duplicate window is stored once (the PubAck then says "duplicate"); not the
webhook-id, which two endpoints publishing one event into one stream share,
and the second of which would be dropped as a duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import OrderedDict
from dataclasses import dataclass, field

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import PubAck

from deliveries.dispatch.brokers import BrokerFailure, BrokerMessage
from deliveries.models import ErrorKind

logger = logging.getLogger(__name__)

DEDUPE_HEADER = "Nats-Msg-Id"
DELIVERY_HEADER = "X-Relay-Delivery-Id"
CLIENT_NAME = "webhook-relay"
# Closing a connection whose peer has stopped reading must not hold a send.
CLOSE_TIMEOUT_SECONDS = 1.0
# What the server says when it refuses the credentials or a subject.
AUTHORIZATION_VIOLATION = "authorization violation"
PERMISSIONS_VIOLATION = "permissions violation"


@dataclass
class _Link:
    """One connection and what happened to it since it was dialled."""

    client: Client
    js: JetStreamContext
    # Set when the connection closes or the server refuses a subject: a
    # publish waiting for its PubAck looks at it rather than waiting out
    # the deadline (nats-py leaves a pending request waiting after a close).
    trouble: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    server_error: str = ""
    users: int = 0  # publishes in flight on it
    retired: bool = False  # out of the pool: closed when its last user is done


@dataclass
class _Gate:
    """One dial at a time per key: a burst of sends to a cold broker shares
    the first connection rather than opening one each."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


class _PlaintextRefused(Exception):
    """The URL asks for TLS and the server did not start it."""


class Sender:
    """Publishes to JetStream over pooled connections, one per pool key."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._links: OrderedDict[tuple, _Link] = OrderedDict()
        self._gates: dict[tuple, _Gate] = {}

    async def publish(self, message: BrokerMessage) -> str:
        subject = str(message.target.get("subject", ""))
        link = await self._link(message)
        link.users += 1
        try:
            ack = await self._acknowledged(link, message, subject)
        except BrokerFailure as failure:
            if failure.kind in (ErrorKind.CONNECTION, ErrorKind.BROKER_AUTH):
                await self._drop(message.pool_key, link)
            raise
        except BaseException:
            # A timeout, a cancellation or a surprise: whether the server has
            # the message, and what the connection holds, is unknown.
            await self._drop(message.pool_key, link)
            raise
        finally:
            link.users -= 1
            if link.retired and link.users == 0:
                await _close(link)
        duplicate = ", duplicate: already stored" if ack.duplicate else ""
        return f"JetStream PubAck: stream '{ack.stream}', sequence {ack.seq}{duplicate}"

    async def forget(self, message: BrokerMessage) -> None:
        link = self._links.get(message.pool_key)
        if link is not None:
            await self._drop(message.pool_key, link)

    async def close(self) -> None:
        links, self._links = list(self._links.values()), OrderedDict()
        for link in links:
            await _close(link)

    async def _acknowledged(
        self, link: _Link, message: BrokerMessage, subject: str
    ) -> PubAck:
        headers = dict(message.headers)
        delivery_id = headers.get(DELIVERY_HEADER) or headers.get("webhook-id")
        if delivery_id:
            headers[DEDUPE_HEADER] = delivery_id
        publishing = asyncio.ensure_future(
            link.js.publish(
                subject, message.body, timeout=message.timeout, headers=headers
            )
        )
        watching = asyncio.ensure_future(_troubled(link, subject))
        try:
            await asyncio.wait(
                {publishing, watching}, return_when=asyncio.FIRST_COMPLETED
            )
            if not publishing.done():
                raise watching.result()
            return _pub_ack(publishing, subject)
        finally:
            for task in (publishing, watching):
                task.cancel()
            await asyncio.gather(publishing, watching, return_exceptions=True)

    async def _link(self, message: BrokerMessage) -> _Link:
        key = message.pool_key
        gate = self._gates.setdefault(key, _Gate())
        gate.waiting += 1
        try:
            async with gate.lock:
                link = self._links.get(key)
                if link is not None and not link.closed:
                    self._links.move_to_end(key)
                    return link
                if link is not None:
                    await self._drop(key, link)
                link = await _dial(message)
                self._links[key] = link
                while len(self._links) > self.limit:
                    _, oldest = self._links.popitem(last=False)
                    await _retire(oldest)
                return link
        finally:
            gate.waiting -= 1
            if not gate.waiting:
                del self._gates[key]

    async def _drop(self, key: tuple, link: _Link) -> None:
        if self._links.get(key) is link:
            del self._links[key]
        await _close(link)


async def _dial(message: BrokerMessage) -> _Link:
    client = Client()
    link = _Link(client=client, js=client.jetstream())

    async def on_error(exc: Exception) -> None:
        # nats-py's default logs every error at ERROR with a traceback; an
        # attempt records what matters. Its errors never hold credentials.
        logger.debug("NATS %s:%s: %s", message.host, message.port, exc)
        text = str(exc)
        if PERMISSIONS_VIOLATION in text.lower():
            link.server_error = text.removeprefix("nats: ").strip("'")
            link.trouble.set()

    async def on_closed() -> None:
        link.closed = True
        link.trouble.set()

    user, password, token = _credentials(message, client)
    host = f"[{message.address}]" if ":" in message.address else message.address
    try:
        await client.connect(
            f"nats://{host}:{message.port}",
            name=CLIENT_NAME,
            error_cb=on_error,
            disconnected_cb=on_closed,
            closed_cb=on_closed,
            allow_reconnect=False,
            # nats-py's 0 means "retry without end" (a refused port then spun
            # past the attempt's deadline here), and with one server any limit
            # still makes a second dial: 1, at once, is the fewest.
            max_reconnect_attempts=1,
            reconnect_time_wait=0,
            connect_timeout=message.timeout,
            tls=(message.ssl_context or ssl.create_default_context())
            if message.tls
            else None,
            tls_hostname=message.host,  # the certificate names the host, not the IP
            user=user,
            password=password,
            token=token,
        )
        if message.tls and not _tls_started(client):
            raise _PlaintextRefused
    except BaseException as exc:
        await _close(link)  # cancelled too: nothing half-open is left behind
        if isinstance(exc, Exception):
            raise _connect_failure(exc, message) from None
        raise
    return link


def _credentials(message: BrokerMessage, client: Client):
    """(user, password, token) as nats-py takes them: a user alone is a
    token, as in a nats:// URL. Each is read only when CONNECT is written,
    after the TLS upgrade, and refused there if TLS was asked for and not
    started, so a password never crosses a connection in clear."""
    if not message.user and not message.password:
        return None, None, None

    def revealed(value: str):
        def reveal() -> str:
            if message.tls and not _tls_started(client):
                raise _PlaintextRefused
            return value

        return reveal

    if message.user and not message.password:
        return None, None, revealed(message.user)
    return revealed(message.user), revealed(message.password), None


def _tls_started(client: Client) -> bool:
    # nats-py upgrades to TLS only when the server's INFO requires it, and
    # otherwise carries on in clear even when given a TLS context; the INFO
    # it kept (no public accessor in 2.16) says which happened.
    return bool(client._server_info.get("tls_required"))  # noqa: SLF001


def _connect_failure(exc: Exception, message: BrokerMessage) -> Exception:
    """What a failed dial means; timeouts and TLS errors pass through for
    KindSender to judge."""
    where = f"{message.host}:{message.port}"
    if isinstance(exc, _PlaintextRefused):
        return BrokerFailure(
            ErrorKind.TLS,
            f"the NATS server at {where} did not start TLS, which the tls:// URL "
            "requires; nothing was sent",
        )
    if isinstance(exc, (TimeoutError, ssl.SSLError)):
        return exc
    text = str(exc).removeprefix("nats: ").strip("'")
    if AUTHORIZATION_VIOLATION in text.lower() or isinstance(
        exc, nats.errors.AuthorizationError
    ):
        return BrokerFailure(
            ErrorKind.BROKER_AUTH,
            f"the NATS server at {where} refused the credentials ({text})",
        )
    if isinstance(exc, nats.errors.NoServersError):
        text = "connection refused"  # what on_error was told, twice
    elif isinstance(exc, OSError):
        text = exc.strerror or type(exc).__name__
    return BrokerFailure(
        ErrorKind.CONNECTION, f"could not connect to the NATS server at {where}: {text}"
    )


async def _troubled(link: _Link, subject: str) -> BrokerFailure:
    """Waits until the connection closes or the server refuses this subject,
    and says so; a refusal of another subject is another publish's."""
    while True:
        await link.trouble.wait()
        if link.closed:
            return BrokerFailure(
                ErrorKind.CONNECTION,
                "the connection to the NATS server closed before JetStream "
                "acknowledged the message",
            )
        if f'"{subject}"' in link.server_error:
            return BrokerFailure(
                ErrorKind.BROKER_AUTH, f"the NATS server refused: {link.server_error}"
            )
        link.trouble.clear()


def _pub_ack(publishing: asyncio.Future, subject: str) -> PubAck:
    """The PubAck, or the broker's refusal as a BrokerFailure."""
    try:
        return publishing.result()
    except (nats.js.errors.NoStreamResponseError, nats.errors.NoRespondersError):
        raise BrokerFailure(
            ErrorKind.BROKER_REFUSED,
            f"no JetStream stream takes subject {subject!r}",
        ) from None
    except nats.js.errors.APIError as exc:
        raise BrokerFailure(
            ErrorKind.BROKER_REFUSED,
            f"JetStream refused the message: {exc.description} "
            f"(code {exc.code}, error {exc.err_code})",
        ) from None
    except nats.errors.MaxPayloadError:
        raise BrokerFailure(
            ErrorKind.BROKER_REFUSED,
            "the message is larger than the NATS server's max_payload",
        ) from None
    except nats.errors.BadSubjectError:
        raise BrokerFailure(
            ErrorKind.BROKER_REFUSED, f"{subject!r} is not a subject NATS accepts"
        ) from None
    except nats.errors.ConnectionClosedError:
        raise BrokerFailure(
            ErrorKind.CONNECTION, "the connection to the NATS server was closed"
        ) from None
    except (ValueError, KeyError, TypeError):
        # Something answered on the subject, but not JetStream (a plain
        # NATS responder): the message may or may not be anywhere.
        raise BrokerFailure(
            ErrorKind.BROKER_REFUSED,
            f"what answered on {subject!r} is not JetStream (no PubAck)",
        ) from None


async def _retire(link: _Link) -> None:
    """Out of the pool; closed now, or when its last publish is done."""
    link.retired = True
    if link.users == 0:
        await _close(link)


async def _close(link: _Link) -> None:
    link.closed = True
    link.trouble.set()
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_SECONDS):
            await link.client.close()
    except Exception:  # noqa: BLE001, S110 - a connection already gone may fail to close
        pass
