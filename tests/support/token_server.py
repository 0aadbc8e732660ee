"""A real OAuth2 token endpoint on 127.0.0.1 for tests of the client
credentials grant (deliveries/dispatch/endpoint_auth.py): aiohttp on an
asyncio loop of its own thread.

It records every request (headers, form) and, by default, issues a new
token each time ("tok-1", "tok-2", ...), with `expires_in` when set. A test
may set `answer` to decide each reply itself (any status, any bytes),
`delay` to answer late, or `stall` to read the request and never answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from aiohttp import web


@dataclass(frozen=True)
class TokenRequest:
    headers: dict[str, str]
    form: dict[str, str]


@dataclass(frozen=True)
class TokenReply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(
        default_factory=lambda: {"Content-Type": "application/json"}
    )


def json_reply(status: int = 200, **data) -> TokenReply:
    return TokenReply(status, json.dumps(data).encode())


class TokenServer:
    def __init__(self, *, expires_in: float | None = 3600) -> None:
        self.expires_in = expires_in
        self.answer: Callable[[TokenRequest], TokenReply] | None = None
        self.stall = False
        self.delay = 0.0  # seconds before each answer: a slow token server
        self.requests: list[TokenRequest] = []
        self.issued: list[str] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/oauth/token"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def __enter__(self) -> TokenServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[TokenRequest]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/oauth/token", self._token)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(parse_qsl((await request.read()).decode()))
        seen = TokenRequest(dict(request.headers), form)
        with self._arrived:
            self.requests.append(seen)
            self._arrived.notify_all()
        if self.stall:
            await asyncio.Event().wait()  # until the server is shut down
        if self.delay:
            await asyncio.sleep(self.delay)  # being slow, not synchronising
        reply = self.answer(seen) if self.answer else self._issue()
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers)

    def _issue(self) -> TokenReply:
        with self._lock:
            token = f"tok-{len(self.issued) + 1}"
            self.issued.append(token)
        data = {"access_token": token, "token_type": "Bearer"}
        if self.expires_in is not None:
            data["expires_in"] = self.expires_in
        return json_reply(**data)
