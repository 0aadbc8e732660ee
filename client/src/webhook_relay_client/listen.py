"""`listen`: forward a merchant's webhooks to a developer's own machine.

A listen session is a temporary pull endpoint on the relay. The listener
pulls its messages and POSTs each to a local URL with the webhook's headers
and the exact body the relay signed, so the developer's handler verifies
them with the session's secret as it would a real delivery. A 2xx is acked;
anything else (an error status, a refused connection, a timeout) is nacked,
and the relay retries it by the endpoint's retry policy.

What the relay answers is input, not trusted: a message it sends malformed
(a field of the wrong type, a header that cannot be sent) is nacked by its
id, or skipped without one, on one line; an answer that cannot be read is
waited out like a relay that cannot answer. Neither stops listening.

One message at a time: each pull leases one, and it is acked or nacked as
soon as its local answer is in. A batch would wait in its lease behind a slow
handler (up to the forward timeout per message) and could outlive it, to be
forwarded twice; one at a time costs a request per message, nothing to a
developer's trickle of webhooks.

Stopping (`stop()`, safe from a signal handler) lets the message in hand
finish, nacks any not yet forwarded, and ends the session, whose unfinished
messages then go dead on the relay: nothing piles up for a laptop that is
gone. A listener killed outright leaves its session to the relay, which ends
it after its idle time (LISTEN_IDLE_SECONDS).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from webhook_relay_client.errors import ApiError, RelayError, TransportError
from webhook_relay_client.forwarding import (
    FORWARD_TIMEOUT,
    Forwarded,
    delivery_line,
    event_type,
    forward,
    forward_url_check,
    header,
)
from webhook_relay_client.models import UnusableMessage

PULL_LIMIT = 1  # messages per pull (see above: none waits in its lease)
IDLE_WAITS = (0.25, 0.5, 1.0)  # seconds between empty pulls, then the last again
RELAY_WAIT_FIRST = 1.0  # seconds after a transient relay error, doubling...
RELAY_WAIT_MAX = 10.0  # ...up to this, while the relay cannot answer
# Seconds between tries of an ack or nack the relay could not take: short,
# since the message's lease is running (an ack after it is refused).
ANSWER_RETRY_WAITS = (0.5, 1.0)
# Statuses that say "later" rather than "no": the relay is overloaded or
# restarting. Anything else 4xx is a refusal that trying again cannot change.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class ListenError(RelayError):
    """Listening cannot go on (a key refused, a session ended on the relay):
    the message says what happened, for a person to read."""


def is_bad_answer(error: RelayError) -> bool:
    """True when the relay said yes (a 2xx) in a body that cannot be read:
    no refusal, so nothing to stop for."""
    return isinstance(error, ApiError) and 200 <= error.status < 300


def is_transient(error: RelayError) -> bool:
    """True when the relay could not answer now but may later."""
    if isinstance(error, TransportError) or is_bad_answer(error):
        return True
    return isinstance(error, ApiError) and error.status in TRANSIENT_STATUSES


def signing_lines(session: Any) -> list[str]:
    """What the developer's handler verifies with, by the session's scheme:
    the secret for v1 signatures, the public key for v1a ones."""
    lines = []
    if session.signing in ("v1", "both"):
        lines.append(
            f"Signing secret: {session.secret}  (shown once: your handler "
            "verifies the webhooks with it)"
        )
    if session.signing in ("v1a", "both"):
        lines.append(
            f"Public key: {session.public_key}  (checks the webhooks' v1a signatures)"
        )
    return lines


class Listener:
    """Pulls one listen session and forwards its messages to `forward_to`.

    `client` is a webhook_relay_client.Client; `stopping` the event `stop()`
    sets (give the client `sleep=stopping.wait`, so its own retry waits end
    when stopping begins); `out` prints a line; `clock` reads local time.
    """

    def __init__(
        self,
        client: Any,
        *,
        merchant: str,
        forward_to: str,
        stopping: threading.Event | None = None,
        limit: int = PULL_LIMIT,
        forward_timeout: float = FORWARD_TIMEOUT,
        idle_waits: Sequence[float] = IDLE_WAITS,
        out: Callable[[str], None] = print,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.client = client
        self.merchant = merchant
        self.forward_to = forward_url_check(forward_to)
        self.stopping = threading.Event() if stopping is None else stopping
        self.limit = limit
        self.forward_timeout = forward_timeout
        self.idle_waits = tuple(idle_waits)
        self.out = out
        self.clock = clock
        self.session_id = ""
        self.acked = 0
        self.nacked = 0
        self._idle = 0  # empty pulls in a row
        self._relay_down = False  # said so once; say so when it answers again
        self._relay_wait = RELAY_WAIT_FIRST

    def stop(self) -> None:
        """Ask the loop to stop; safe from a signal handler (it only sets an event)."""
        self.stopping.set()

    # The session

    def start(
        self,
        *,
        event_types: Sequence[str] = (),
        session_id: str | None = None,
    ) -> None:
        """Start a session (or attach to `session_id`, one started in the
        portal) and say what is forwarded where."""
        while not self.stopping.is_set():
            try:
                if session_id:
                    self._attach(session_id)
                else:
                    self._create(event_types)
            except ListenError:
                raise
            except RelayError as error:
                if is_bad_answer(error) and not session_id:
                    # Trying again would start another session for each try.
                    raise ListenError(
                        "the relay's answer to starting a listen session could not "
                        f"be read ({error}); a session it started ends after its "
                        "idle time"
                    ) from None
                doing = "attaching" if session_id else "starting a listen session"
                self._relay_failed(error, doing)
                continue
            self._relay_answered()
            self.out(
                f"Forwarding to {self.forward_to}; Ctrl-C stops and ends the session."
            )
            return

    def _create(self, event_types: Sequence[str]) -> None:
        session = self.client.listen_session_create(
            self.merchant, event_types=list(event_types) or None
        )
        self.session_id = session.id
        types = ", ".join(session.event_types or ()) or "all event types"
        self.out(
            f"Listen session {self.session_id} started for merchant "
            f"{self.merchant} ({types})."
        )
        for line in signing_lines(session):
            self.out(line)

    def _attach(self, session_id: str) -> None:
        session = self.client.listen_session_get(self.merchant, session_id)
        if session.state != "live":
            raise ListenError(f"listen session {session_id} has ended; start another")
        self.session_id = session_id
        types = ", ".join(session.event_types or ()) or "all event types"
        self.out(
            f"Attached to listen session {session_id} of merchant {self.merchant} "
            f"({types}); its signing secret was shown when it was started."
        )

    def run(self) -> None:
        """Pull and forward until stop(), then end the session. ListenError
        when the relay refuses to go on (the session is then not ended here:
        the relay has ended it, or the key cannot)."""
        while not self.stopping.is_set():
            self.step()
        self.finish()

    def finish(self) -> None:
        """End the session and print the last line; ListenError when the
        relay could not be told (it then ends the session after its idle time)."""
        if not self.session_id:
            self.out("Stopped before a listen session started.")
            return
        try:
            self.client.listen_session_end(
                self.merchant, self.session_id, reason="stopped"
            )
        except RelayError as error:
            raise ListenError(
                f"stopped, but could not end listen session {self.session_id} "
                f"({error}); the relay ends it after its idle time"
            ) from None
        self.out(
            f"Stopped: listen session {self.session_id} ended; "
            f"{self.acked} acked, {self.nacked} nacked."
        )

    # The loop

    def step(self) -> None:
        """One pull, and every message it brought forwarded and answered;
        a wait when there was nothing or the relay could not answer."""
        try:
            messages = self.client._messages_pull_checked(
                self.merchant, self.session_id, limit=self.limit
            )
        except RelayError as error:
            self._relay_failed(error, "pulling")
            return
        self._relay_answered()
        if not messages:
            self._wait(self.idle_waits[min(self._idle, len(self.idle_waits) - 1)])
            self._idle += 1
            return
        self._idle = 0
        for n, message in enumerate(messages):
            if self.stopping.is_set():
                self._give_back([m.id for m in messages[n:] if m.id is not None])
                return
            if isinstance(message, UnusableMessage):
                self.refuse(message)
            else:
                self.deliver(message)

    def deliver(self, message: Any) -> Forwarded:
        """Forward one message, print its line, and ack or nack it."""
        headers = message.headers
        body = message.body
        forwarded = forward(
            self.forward_to,
            headers,
            body.encode("utf-8"),
            timeout=self.forward_timeout,
        )
        self.out(
            delivery_line(
                at=self.clock(),
                type=event_type(body),
                event_id=header(headers, "webhook-id") or message.id,
                attempt=message.attempt,
                outcome=forwarded.outcome(),
                duration_ms=forwarded.duration_ms,
            )
        )
        self._answer(message.id, acked=forwarded.ok)
        return forwarded

    def refuse(self, message: UnusableMessage) -> None:
        """A message the relay sent malformed, never forwarded: nacked when
        it has an id (the relay spends an attempt on it, and retries or ends
        it), else left to run out its lease."""
        at = f"{self.clock():%Y-%m-%d %H:%M:%S}"
        if message.id is None:
            self.out(
                f"{at}  unusable message without an id ({message.why})  -> skipped;"
                " the relay hands it out again when its lease runs out"
            )
            return
        self.out(f"{at}  unusable message {message.id} ({message.why})  -> nacked")
        self._answer(message.id, acked=False)

    def _answer(self, message_id: str, *, acked: bool) -> None:
        verb = "ack" if acked else "nack"
        send = self.client.messages_ack if acked else self.client.messages_nack
        for wait in (*ANSWER_RETRY_WAITS, None):
            try:
                answer = send(self.merchant, self.session_id, [message_id])
                break
            except RelayError as error:
                if is_bad_answer(error):
                    # It may have taken the answer: sending it again would
                    # read as a lease run out. Say what is known.
                    self.out(
                        f"  the relay's answer to the {verb} of {message_id} could "
                        f"not be read ({error}); if the {verb} was not taken, the "
                        "relay hands the message out again when its lease runs out"
                    )
                    return
                if not is_transient(error):
                    self._refused(error, verb + "ing")
                if wait is None:
                    self.out(
                        f"  could not {verb} {message_id} ({error}); the relay "
                        "hands it out again when its lease runs out"
                    )
                    return
                self._wait(wait)
        if message_id in (answer.rejected or ()):
            self.out(
                f"  {verb} of {message_id} refused: its lease had run out, so "
                "the relay hands it out again"
            )
        elif acked:
            self.acked += 1
        else:
            self.nacked += 1

    def _give_back(self, message_ids: list[str]) -> None:
        """Stopping with messages not yet forwarded: nack them, so they do not
        wait out their lease (the session's end then settles them)."""
        if not message_ids:
            return
        try:
            self.client.messages_nack(self.merchant, self.session_id, message_ids)
        except RelayError:
            return  # the session's end settles them all the same
        self.nacked += len(message_ids)

    # Waiting

    def _wait(self, seconds: float) -> None:
        self.stopping.wait(seconds)  # returns early when stop() is called

    def _relay_answered(self) -> None:
        if self._relay_down:
            self.out("The relay answers again.")
        self._relay_down = False
        self._relay_wait = RELAY_WAIT_FIRST

    def _relay_failed(self, error: RelayError, doing: str) -> None:
        if not is_transient(error):
            self._refused(error, doing)
        if not self._relay_down:
            self._relay_down = True
            if is_bad_answer(error):
                self.out(
                    f"The relay's answer could not be read ({error}); trying "
                    "again until it can."
                )
            else:
                self.out(
                    f"The relay cannot answer ({error}); trying again until it does."
                )
        asked = error.retry_after if isinstance(error, ApiError) else None
        self._wait(min(asked or self._relay_wait, RELAY_WAIT_MAX))
        self._relay_wait = min(self._relay_wait * 2, RELAY_WAIT_MAX)

    def _refused(self, error: RelayError, doing: str) -> None:
        status = error.status if isinstance(error, ApiError) else None
        if status == 410:
            raise ListenError(
                f"listen session {self.session_id} has ended on the relay "
                f"({self._ended_reason()}); start another"
            ) from None
        if status == 401:
            raise ListenError(
                f"the relay refused the API key while {doing} ({error}); check "
                "--api-key or WEBHOOK_RELAY_API_KEY"
            ) from None
        raise ListenError(f"the relay refused {doing}: {error}") from None

    def _ended_reason(self) -> str:
        """Why the relay ended the session, as it says (the portal, idle)."""
        try:
            session = self.client.listen_session_get(self.merchant, self.session_id)
        except RelayError:
            return "it did not say why"
        return session.ended_reason or "it did not say why"
