"""The Redis Streams sender against the real Redis on 127.0.0.1:6379.

Every stream key and ACL user is named with a uuid and removed at the end, so
two runs at once never meet. A broker that goes away is a TcpProxy cut, one
that hangs a loopback socket that never answers: the shared Redis is never
stopped or reconfigured. TLS: test_redis_streams_tls.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import threading
import time
import uuid

import pytest
import redis
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.brokers.redis_streams import Sender
from deliveries.dispatch.outgoing import signed_request
from deliveries.dispatch.transport import OutgoingRequest, SendResult
from tests.acceptance.tcp_proxy import TcpProxy
from tests.support.jobs import a_job

REDIS = ("127.0.0.1", 6379)
SECRET = "whsec_c2VjcmV0"  # a_job()'s signing secret


class NoHttp:
    """HTTP is not under test here: a broker request must never reach it."""

    async def send(self, request):
        raise AssertionError("a redis request went to the HTTP sender")

    async def close(self) -> None:
        pass


@pytest.fixture
def admin():
    client = redis.Redis(*REDIS)
    yield client
    client.close()


@pytest.fixture
def stream(admin):
    key = f"relay-test-{uuid.uuid4().hex}"
    yield key
    admin.delete(key)


@pytest.fixture
def acl_users(admin):
    """make(key_pattern) -> (user, password): an ACL user allowed only the
    keys matching key_pattern, deleted at the end."""
    made = []

    def make(key_pattern: str) -> tuple[str, str]:
        user, password = f"relay-test-{uuid.uuid4().hex}", uuid.uuid4().hex
        admin.acl_setuser(
            user,
            enabled=True,
            passwords=[f"+{password}"],
            keys=[key_pattern],
            commands=["+@all"],
        )
        made.append(user)
        return user, password

    yield make
    for user in made:
        admin.acl_deluser(user)


def redis_request(
    port: int,
    stream: str,
    *,
    host: str = "127.0.0.1",
    scheme: str = "redis",
    maxlen: int | None = None,
    credentials: str = "",
    broker_hosts: tuple[str, ...] = ("127.0.0.1",),
) -> OutgoingRequest:
    signed = signed_request(
        a_job(url=f"{scheme}://{host}:{port}"), timestamp=int(time.time())
    )
    return dataclasses.replace(
        signed,
        kind="redis",
        target={"stream": stream, "maxlen": maxlen},
        credentials=credentials,
        broker_hosts=broker_hosts,
    )


def send_all(requests: list[OutgoingRequest], **options) -> list[SendResult]:
    """Send the requests in turn through one KindSender; its results."""

    async def go() -> list[SendResult]:
        sender = KindSender(
            http=NoHttp(),
            timeout=options.pop("timeout", 3.0),
            allow_private=False,
            **options,
        )
        try:
            return [await sender.send(request) for request in requests]
        finally:
            await sender.close()

    return asyncio.run(go())


def entry_fields(admin, stream: str) -> tuple[str, dict[bytes, bytes]]:
    [(entry_id, fields)] = admin.xrange(stream)
    return entry_id.decode(), fields


def eventually(check, within: float = 2.0) -> bool:
    """Polls check until it holds or `within` seconds pass: Redis notices a
    client's close on its own time, and says nothing when it has."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class RedisFront:
    """A loopback front for the real Redis, on a loop in a thread of its own:
    TLS when given a server context; with hold=True, Redis's answers wait at
    the front until release(), so a command can be caught in flight."""

    def __init__(self, *, tls: ssl.SSLContext | None = None, hold: bool = False):
        self.holding = threading.Event()  # an answer waits at the front
        self.hung_up = threading.Event()  # a client closed its connection
        self._hold = hold
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(tls), self._loop)
        self.port = self._server.result().sockets[0].getsockname()[1]

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._released.set)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._server.result().close)
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _start(self, tls: ssl.SSLContext | None) -> asyncio.Server:
        self._released = asyncio.Event()
        if not self._hold:
            self._released.set()
        return await asyncio.start_server(self._front, "127.0.0.1", 0, ssl=tls)

    async def _front(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection(*REDIS)
        await asyncio.gather(
            self._to_redis(reader, up_writer),
            self._to_client(up_reader, writer),
            return_exceptions=True,
        )

    async def _to_redis(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            self.hung_up.set()
        finally:
            writer.close()

    async def _to_client(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                if not self._released.is_set():
                    self.holding.set()
                    await self._released.wait()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


# --- delivered ----------------------------------------------------------------


def test_a_consumer_reads_the_exact_body_and_verifies_the_signature(admin, stream):
    request = redis_request(REDIS[1], stream)

    [result] = send_all([request])

    assert result.acknowledged, result
    entry_id, fields = entry_fields(admin, stream)
    assert result.body_excerpt == f"XADD id {entry_id} (stream {stream!r})"
    assert fields[b"body"] == request.body
    headers = {k.decode(): v.decode() for k, v in fields.items() if k != b"body"}
    assert headers["x-relay-delivery-id"] == "dlv_1"
    assert headers["content-type"] == "application/json"
    assert Webhook(SECRET).verify(fields[b"body"], headers) == {
        "data": {"card": "4242"}
    }


def test_maxlen_keeps_the_stream_near_its_bound(admin, stream):
    # MAXLEN ~ trims a whole node at a time: at most one node over the bound.
    node = int(admin.config_get("stream-node-max-entries")["stream-node-max-entries"])
    request = redis_request(REDIS[1], stream, maxlen=20)

    results = send_all([request] * (2 * node + 100))

    assert all(result.acknowledged for result in results)
    assert 20 <= admin.xlen(stream) <= 20 + node


# --- refused --------------------------------------------------------------------


def test_a_key_that_is_not_a_stream_is_refused_in_the_brokers_words(admin, stream):
    admin.set(stream, "a string, not a stream")

    [result] = send_all([redis_request(REDIS[1], stream)])

    assert not result.acknowledged
    assert result.error_kind == "broker_refused"
    assert result.error_message == (
        "Redis answered: WRONGTYPE Operation against a key holding the wrong "
        "kind of value"
    )


def test_a_password_for_a_server_without_one_is_broker_auth(stream):
    password = uuid.uuid4().hex
    request = redis_request(REDIS[1], stream, credentials=f":{password}")

    [result] = send_all([request])

    assert (result.error_kind, result.acknowledged) == ("broker_auth", False)
    assert result.error_message.startswith(
        "Redis refused the user: ERR AUTH <password> called without any password "
        "configured for the default user"
    )
    assert password not in result.error_message + result.body_excerpt


def test_a_wrong_password_for_an_acl_user_is_broker_auth(stream, acl_users):
    user, _ = acl_users(stream)
    wrong = uuid.uuid4().hex
    request = redis_request(REDIS[1], stream, credentials=f"{user}:{wrong}")

    [result] = send_all([request])

    assert (result.error_kind, result.acknowledged) == ("broker_auth", False)
    assert "WRONGPASS" in result.error_message
    assert wrong not in result.error_message + result.body_excerpt


def test_a_user_not_allowed_the_stream_is_broker_auth(admin, stream, acl_users):
    user, password = acl_users(f"{stream}-other")
    request = redis_request(REDIS[1], stream, credentials=f"{user}:{password}")

    [result] = send_all([request])

    assert (result.error_kind, result.acknowledged) == ("broker_auth", False)
    assert "NOPERM" in result.error_message
    assert password not in result.error_message + result.body_excerpt
    assert admin.exists(stream) == 0


def test_a_host_not_listed_is_blocked_before_any_connection(stream):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        request = redis_request(port, stream, broker_hosts=("10.20.30.40",))

        [result] = send_all([request])

        assert result.error_kind == "destination_blocked"
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing dialled it


# --- the broker goes away or hangs -------------------------------------------------


def test_a_cut_broker_fails_one_attempt_and_the_next_redials(admin, stream):
    with TcpProxy(REDIS) as proxy:
        request = redis_request(proxy.port, stream)

        async def go() -> list[SendResult]:
            sender = KindSender(http=NoHttp(), timeout=3.0, allow_private=False)
            try:
                results = [await sender.send(request)]
                proxy.cut()
                results.append(await sender.send(request))
                proxy.resume()
                results.append(await sender.send(request))
                return results
            finally:
                await sender.close()

        before, during, after = asyncio.run(go())

    assert before.acknowledged and after.acknowledged
    assert (during.error_kind, during.acknowledged) == ("connection_error", False)
    assert during.error_message.startswith("the connection to Redis failed: ")
    assert proxy.refused <= 1  # the failed send dialled at most once: no retries
    assert proxy.accepted == 2  # the first connection, and one redialled after
    assert admin.xlen(stream) == 2


def test_a_broker_that_never_answers_times_out_and_is_hung_up_on(stream):
    accepted: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        threading.Thread(
            target=lambda: accepted.append(listener.accept()[0]), daemon=True
        ).start()
        request = redis_request(listener.getsockname()[1], stream)

        started = time.monotonic()
        [result] = send_all([request], timeout=1.0)
        took = time.monotonic() - started

        assert (result.error_kind, result.acknowledged) == ("timeout", False)
        assert took < 1.0 + 1.0
        [hung] = accepted
        with hung:
            hung.settimeout(2.0)
            while hung.recv(65536):  # what the client said, then its close
                pass


def test_the_pool_keeps_at_most_its_limit_of_clients(admin, stream, acl_users):
    users = [acl_users(stream) for _ in range(3)]
    requests = [
        redis_request(REDIS[1], stream, credentials=f"{user}:{password}")
        for user, password in users
    ]
    names = [user for user, _ in users]

    def connected() -> list[str]:
        return sorted(c["user"] for c in admin.client_list() if c["user"] in names)

    async def go() -> None:
        sender = KindSender(
            http=NoHttp(),
            timeout=3.0,
            allow_private=False,
            senders={"redis": Sender(limit=2)},
        )
        try:
            for request in requests:
                assert (await sender.send(request)).acknowledged
            # The least recently used (the first user's) was closed.
            assert eventually(lambda: connected() == sorted(names[1:])), connected()
        finally:
            await sender.close()
        assert eventually(lambda: connected() == []), connected()

    asyncio.run(go())
    assert admin.xlen(stream) == 3


def test_a_client_pushed_out_while_publishing_finishes_then_closes(admin, stream):
    front = RedisFront(hold=True)
    try:

        async def go() -> tuple[SendResult, SendResult, bool]:
            sender = KindSender(
                http=NoHttp(),
                timeout=3.0,
                allow_private=False,
                senders={"redis": Sender(limit=1)},
            )
            try:
                slow = asyncio.create_task(
                    sender.send(redis_request(front.port, stream))
                )
                assert await asyncio.to_thread(front.holding.wait, 2.0)
                # In flight: the next client takes the pool's one place.
                quick = await sender.send(redis_request(REDIS[1], stream))
                front.release()
                slow_result = await slow
                closed = await asyncio.to_thread(front.hung_up.wait, 2.0)
                return slow_result, quick, closed
            finally:
                await sender.close()

        slow, quick, closed = asyncio.run(go())
    finally:
        front.close()

    assert slow.acknowledged, slow  # not closed under its publish
    assert quick.acknowledged, quick
    assert closed  # then closed when it ended, though out of the pool
    assert admin.xlen(stream) == 2
