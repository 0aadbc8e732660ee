"""An endpoint's auth on the send path (contract section 9, issue 42 item 2):
HTTP Basic, or an OAuth2 client-credentials bearer token (RFC 6749 4.4).

AuthorizingSender wraps the HTTP sender: a request without auth goes straight
through; with auth it gets an Authorization header. OAuth2 tokens come from
the endpoint's token URL through a second AsyncSender of their own, so the
destination policy (no SSRF through a token URL), DNS pinning and the egress
proxy apply to them exactly as to receivers. A token is kept per dispatcher
process and endpoint credentials version until shortly before it expires,
fetched once however many sends wait for it, and fetched anew once when a
receiver answers 401 to it (with no time left for that, the 401 stands).

Token fetches are bounded per merchant (tenant_token_fetches) and per
dispatcher (token_fetches, at least its concurrency): a fetch outlives the
send that started it, so a merchant whose token servers never answer would
otherwise hold every slot and starve the others'. A send whose fetch could
not start in time says whose slots were busy, and is not recorded as its
token server's failure: that server was never asked.

The token server is as hostile as a receiver: its answer is bounded
(token_answer.py) and only its status and RFC 6749 5.2 error code reach the
attempt. No secret or token is logged, recorded or put in a message.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import quote_plus, urlencode

from yarl import URL

from deliveries.dispatch import token_answer
from deliveries.dispatch.credentials import EndpointAuth
from deliveries.dispatch.token_answer import TokenRefused
from deliveries.dispatch.token_slots import RELAY, SlotsBusy, TokenSlots
from deliveries.dispatch.transport import AsyncSender, OutgoingRequest, SendResult
from deliveries.models import ErrorKind

BASIC = "basic"
OAUTH2 = "oauth2"
AUTHORIZATION = "Authorization"
# What the attempt records in place of the header's value (outgoing.py).
REDACTED = {BASIC: "Basic (redacted)", OAUTH2: "Bearer (redacted)"}

TOKEN_BODY_LIMIT = 16384  # bytes of a token server's answer read, at most
# Token fetches (sockets to token servers) in flight at once per dispatcher,
# at least: run_dispatcher gives its concurrency when that is more.
TOKEN_CONNECTIONS = 64
# Token fetches one merchant has in flight at once: its stalled token servers
# hold no more of the dispatcher's than this.
TENANT_TOKEN_FETCHES = 8
# Tokens a dispatcher keeps at once; the least recently used is fetched again.
KEPT_TOKENS = 4096
# A token is dropped this long before its expires_in says it ends: at most a
# minute, and a tenth of a short life, so a send never carries one that ends
# on its way.
EXPIRY_MARGIN_SECONDS = 60.0
EXPIRY_MARGIN_SHARE = 0.1
# An answer without expires_in (RFC 6749 5.1 makes it optional): the token is
# kept this long, then fetched again.
DEFAULT_KEEP_SECONDS = 300.0
# However long a token server says its token lives, it is fetched again after
# this: a revoked token that receivers keep accepting is not used for ever.
LONGEST_KEEP_SECONDS = 86400.0

_FORM_HEADERS = {
    "Content-Type": "application/x-www-form-urlencoded",
    "Accept": "application/json",
}


def token_fetch_limit(concurrency: int) -> int:
    """Token fetches a dispatcher of `concurrency` send slots allows at once:
    one per send slot, so its own sends never queue for one."""
    return max(TOKEN_CONNECTIONS, concurrency)


def authorized_headers(headers: Mapping[str, str], value: str) -> dict[str, str]:
    """headers with Authorization set to value, after the others: the
    endpoint's auth replaces a custom header of that name, whatever its case."""
    kept = {name: v for name, v in headers.items() if name.lower() != "authorization"}
    kept[AUTHORIZATION] = value
    return kept


def basic_credentials(user: str, password: str) -> str:
    """An HTTP Basic header value (RFC 7617, UTF-8)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


@dataclass(frozen=True)
class _Kept:
    token: str = field(repr=False)
    until: float  # on the sender's monotonic clock


class TokenCache:
    """Tokens by (endpoint id, credentials version), least recently used
    dropped past `size`. One event loop's; no locks."""

    def __init__(self, *, size: int = KEPT_TOKENS) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()

    def get(self, key: tuple[str, str], now: float) -> str | None:
        kept = self._kept.get(key)
        if kept is None:
            return None
        if now >= kept.until:
            del self._kept[key]
            return None
        self._kept.move_to_end(key)
        return kept.token

    def put(self, key: tuple[str, str], token: str, until: float) -> None:
        self._kept[key] = _Kept(token, until)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def drop(self, key: tuple[str, str], token: str) -> None:
        """Forget token, unless another has replaced it since: a 401 to an
        old token must not throw away the fresh one another send fetched."""
        kept = self._kept.get(key)
        if kept is not None and kept.token == token:
            del self._kept[key]

    def __len__(self) -> int:
        return len(self._kept)


def keep_seconds(expires_in: float | None) -> float:
    """How long a token said to live expires_in seconds is used."""
    if expires_in is None:
        return DEFAULT_KEEP_SECONDS
    lifetime = min(expires_in, LONGEST_KEEP_SECONDS)
    return max(
        0.0, lifetime - min(EXPIRY_MARGIN_SECONDS, EXPIRY_MARGIN_SHARE * lifetime)
    )


class _NoToken(Exception):
    """No token for this send: the attempt ends with kind and message.
    `late`: the send's own time ran out waiting for it."""

    def __init__(self, kind: str, message: str, *, late: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.late = late


class AuthorizingSender:
    """The HTTP sender with each endpoint's auth added (see the module's
    docstring). Every attempt, token fetch and resend included, ends within
    the request's timeout (else the HTTP sender's)."""

    keeps_deadline = True

    def __init__(
        self,
        *,
        http: AsyncSender,
        tokens: AsyncSender,
        monotonic: Callable[[], float] = time.monotonic,
        cache: TokenCache | None = None,
        token_fetches: int = TOKEN_CONNECTIONS,
        tenant_token_fetches: int = TENANT_TOKEN_FETCHES,
    ) -> None:
        # http: the receivers' AsyncSender; tokens: an AsyncSender of its own
        # (its own pool, TOKEN_BODY_LIMIT, at least token_fetches connections)
        # for the token servers.
        self.http = http
        self.tokens = tokens
        self.timeout = http.timeout
        self.monotonic = monotonic
        self.cache = cache if cache is not None else TokenCache()
        self.slots = TokenSlots(total=token_fetches, per_tenant=tenant_token_fetches)
        self._fetching: dict[tuple[str, str], asyncio.Task] = {}

    async def send(self, request: OutgoingRequest) -> SendResult:
        auth = request.auth
        if auth is None:
            return await self.http.send(request)
        started = self.monotonic()
        deadline = started + (request.timeout or self.timeout)
        if auth.type == BASIC:
            value = basic_credentials(auth.username, auth.secret)
            return await self._send_with(request, value, deadline)
        try:
            token = await self._token(auth, deadline, request.tenant)
            result = await self._send_with(request, f"Bearer {token}", deadline)
            if result.status_code == 401:
                # The token may have been revoked or expired early: one more
                # try with a fresh one, within the same attempt.
                self.cache.drop(_key(auth), token)
                result = await self._resend(request, auth, deadline, result)
        except _NoToken as failed:
            ms = (self.monotonic() - started) * 1000
            return SendResult(None, ms, failed.kind, failed.message[:500])
        return replace(result, duration_ms=(self.monotonic() - started) * 1000)

    async def _resend(
        self,
        request: OutgoingRequest,
        auth: EndpointAuth,
        deadline: float,
        refused: SendResult,
    ) -> SendResult:
        """The answer to a resend with a fresh token; the receiver's refusal
        when no time is left for one: its 401 is what is known."""
        try:
            token = await self._token(auth, deadline, request.tenant)
        except _NoToken as failed:
            if failed.late:
                return refused
            raise  # the token server's own failure is the attempt's
        if deadline - self.monotonic() <= 0:
            return refused
        return await self._send_with(request, f"Bearer {token}", deadline)

    async def _send_with(
        self, request: OutgoingRequest, authorization: str, deadline: float
    ) -> SendResult:
        remaining = deadline - self.monotonic()
        if remaining <= 0:
            # A timeout of 0 would read as "the sender's own" below.
            return SendResult(
                None, 0.0, ErrorKind.TIMEOUT, "no time was left to send after the token"
            )
        return await self.http.send(
            replace(
                request,
                headers=authorized_headers(request.headers, authorization),
                timeout=remaining,
            )
        )

    async def _token(
        self, auth: EndpointAuth, deadline: float, tenant: int | None
    ) -> str:
        """The kept token, else the one being fetched, else a new fetch: one
        fetch per endpoint in flight however many sends wait for it."""
        key = _key(auth)
        token = self.cache.get(key, self.monotonic())
        if token is not None:
            return token
        fetch = self._fetching.get(key)
        if fetch is None:
            # A task of its own, which a waiter giving up (its own deadline)
            # does not cancel; given the sender's whole timeout if this send
            # has less, so the sends that join it with more are not cut short.
            fetch = asyncio.ensure_future(
                self._fetch(
                    auth, max(deadline - self.monotonic(), self.timeout), tenant
                )
            )
            self._fetching[key] = fetch
            fetch.add_done_callback(lambda done: self._fetched(key, done))
        remaining = deadline - self.monotonic()
        try:
            async with asyncio.timeout(max(remaining, 0)):
                # shield: one waiter's deadline must not cancel everyone's fetch.
                return await asyncio.shield(fetch)
        except TimeoutError:
            waited = max(remaining, 0)
            host = _host(auth.token_url)
            which = self.slots.waiting_for(key)
            if which is not None:
                # Not auth_failed: the endpoint's token server was never asked.
                words = self.slots.busy_words(which, host=host, waited=waited)
                raise _NoToken(ErrorKind.TIMEOUT, words, late=True) from None
            raise _NoToken(
                ErrorKind.AUTH_FAILED,
                f"no access token from the token server {host} within {waited:.3g} s",
                late=True,
            ) from None

    def _fetched(self, key: tuple[str, str], done: asyncio.Task) -> None:
        if self._fetching.get(key) is done:
            del self._fetching[key]
        if not done.cancelled():
            done.exception()  # its waiters have it; asyncio must not log it

    async def _fetch(
        self, auth: EndpointAuth, timeout: float, tenant: int | None
    ) -> str:
        """POST the client-credentials grant, judge the answer, keep the token;
        all within timeout, the wait for a fetch slot included."""
        host = _host(auth.token_url)
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout
        try:
            async with self.slots.held(_key(auth), tenant, timeout):
                left = ends - loop.time()
                if left <= 0:  # the slot came as time ended; 0 reads as "default"
                    raise SlotsBusy(RELAY)
                result = await self.tokens.send(
                    OutgoingRequest(
                        url=auth.token_url,
                        headers=token_request_headers(auth),
                        body=token_request_body(auth),
                        # The merchant's DNS lookups are bounded together,
                        # token URLs' with its endpoints'.
                        tenant=tenant,
                        timeout=left,
                    )
                )
        except SlotsBusy as busy:
            words = self.slots.busy_words(busy.which, host=host, waited=timeout)
            raise _NoToken(ErrorKind.TIMEOUT, words) from None
        if result.error_kind:
            raise _NoToken(*_fetch_failure(result, host))
        try:
            answer = token_answer.parse(
                result.status_code or 0,
                result.body_excerpt.encode("utf-8", errors="replace"),
                body_limit=TOKEN_BODY_LIMIT,
            )
        except TokenRefused as refused:
            raise _NoToken(
                ErrorKind.AUTH_FAILED,
                _scrubbed(f"the token server {host} {refused}", auth.secret),
            ) from None
        until = self.monotonic() + keep_seconds(answer.expires_in)
        self.cache.put(_key(auth), answer.access_token, until)
        return answer.access_token

    async def close(self) -> None:
        fetches = list(self._fetching.values())
        for fetch in fetches:
            fetch.cancel()
        await asyncio.gather(*fetches, return_exceptions=True)
        await self.http.close()
        await self.tokens.close()


def token_request_headers(auth: EndpointAuth) -> dict[str, str]:
    """The client authenticated with HTTP Basic, id and secret each
    form-urlencoded first (RFC 6749 2.3.1)."""
    user = quote_plus(auth.client_id, safe="")
    password = quote_plus(auth.secret, safe="")
    return {**_FORM_HEADERS, AUTHORIZATION: basic_credentials(user, password)}


def token_request_body(auth: EndpointAuth) -> bytes:
    form = {"grant_type": "client_credentials"}
    if auth.scope:
        form["scope"] = auth.scope
    if auth.audience:
        form["audience"] = auth.audience
    return urlencode(form).encode("ascii")


def _key(auth: EndpointAuth) -> tuple[str, str]:
    return (auth.endpoint_id, auth.version)


def _host(url: str) -> str:
    try:
        return URL(url).host_port_subcomponent or "(no host)"
    except (TypeError, ValueError):
        return "(an invalid URL)"


def _fetch_failure(result: SendResult, host: str) -> tuple[str, str]:
    """The attempt's kind and message for a token request that got no answer."""
    if result.error_kind == ErrorKind.DESTINATION_BLOCKED:
        # Refused by the destination policy like an endpoint URL: as final.
        return ErrorKind.DESTINATION_BLOCKED, f"token URL: {result.error_message}"
    if result.error_kind == ErrorKind.PROXY_ERROR:
        # Our egress proxy, not the endpoint's token server: it spends none of
        # the endpoint's attempts, as for a send (contract section 9).
        return ErrorKind.PROXY_ERROR, f"token URL: {result.error_message}"
    return (
        ErrorKind.AUTH_FAILED,
        f"the token server {host} gave no token: {result.error_message}",
    )


def _scrubbed(text: str, secret: str) -> str:
    # A hostile token server may quote the secret back in its error code.
    return text.replace(secret, "(redacted)") if secret else text
