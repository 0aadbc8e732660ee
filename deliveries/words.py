"""The relay's words for what happened to a delivery: one vocabulary.

The portal, the staff console, the API's ``held`` texts and the emails all
say it this way: "HTTP 401 Unauthorized", "Connection refused", "Retrying
(3 of 10)", "Delivery stopped: the receiver answered 410 Gone". Pure: it
reads the rows it is given and never the database, so each wording is a
state-table test (tests/deliveries/test_words.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from deliveries.models import ErrorKind
from deliveries.retry import is_success
from endpoints.words import status_words

# All a verification's attempt keeps of the receiver's answer, as its body
# (dispatch/outcomes.py): a receiver that reflects the request would reflect
# the challenge, whole or cut, in its body or headers.
ANSWER_NOT_KEPT = (
    "[not kept: the body and headers of an answer to a verification "
    "challenge are never stored]"
)

# What each error kind is called, before the detail the attempt recorded.
KIND_WORDS = {
    ErrorKind.TIMEOUT: "Timed out",
    ErrorKind.CHALLENGE_NOT_ECHOED: "The answer did not echo the verification challenge",
    ErrorKind.CONNECTION: "Could not connect",
    ErrorKind.DNS: "The host name did not resolve",
    ErrorKind.TLS: "TLS failed",
    ErrorKind.DESTINATION_BLOCKED: "Destination refused",
    ErrorKind.NO_SIGNING_SECRET: "Not sent: the endpoint has no live signing secret",
    ErrorKind.LEASE_EXPIRED: "The dispatcher sending it stopped before it finished",
    ErrorKind.INVALID_RESPONSE: "The response could not be read",
    # Both carry the status, said instead whenever it was recorded.
    ErrorKind.HTTP_STATUS: "The receiver answered with a failure status",
    ErrorKind.PERMANENT_STATUS: "The receiver answered with a permanent failure status",
    # A broker endpoint's (deliveries/dispatch/brokers/); the detail is the
    # broker's own answer.
    ErrorKind.BROKER_REFUSED: "The broker refused the message",
    ErrorKind.BROKER_AUTH: (
        "The broker refused access (a wrong user or password, or no permission)"
    ),
    # The relay's own egress proxy, not the receiver: said so, as it is ours
    # to fix and spends none of the endpoint's attempts.
    ErrorKind.PROXY_ERROR: "The relay's egress proxy gave no connection",
    # The endpoint's own token server (OAuth2), before the receiver was asked.
    ErrorKind.AUTH_FAILED: "The endpoint's token server gave no access token",
    # Pull endpoints: the consumer's own word, or what became of a session.
    ErrorKind.NACKED: "The consumer gave it back (nack)",
    ErrorKind.LISTEN_ENDED: "Never pulled: its listen session ended",
    ErrorKind.LISTEN_BACKLOG_FULL: (
        "Never pulled: its listen session held too many unfinished messages"
    ),
}
_BROKER_KINDS = frozenset({ErrorKind.BROKER_REFUSED, ErrorKind.BROKER_AUTH})
# Details that are the kind itself said again, in the words of the
# sockets (and of aiohttp, which recorded attempts before http1.py did).
_REFUSED_MARKERS = ("connection refused", "connect call failed")
# "ClientConnectorError: Cannot connect to host ... ssl:default [...]"
_EXCEPTION = re.compile(r"^[A-Z][A-Za-z]+(Error|Exception)\b")
# How the dispatcher stores a failure status in last_error (dispatch/delivery_update.py).
_HTTP_ERROR = re.compile(r"http (\d{3})", re.IGNORECASE)
_LABEL_ONLY = frozenset({ErrorKind.LEASE_EXPIRED, ErrorKind.NO_SIGNING_SECRET})

# Pull endpoints (deliveries/pull/): nothing is sent, a consumer leases each
# message. Their words where a send's would not be true. A lease a consumer
# let run out is recorded with PULL_LEASE_LOST as its message (leasing.py's
# LOST_MESSAGE; tests hold the two equal), which is how error_words knows it
# from a dispatcher's.
PULL_LEASE_LOST = "the consumer did not ack or nack it within its visibility timeout"
PULL_KIND_WORDS = {
    ErrorKind.LEASE_EXPIRED: (
        "Not acked in time: its consumer did not ack or nack it within the "
        "visibility timeout"
    ),
}
PULLED_WHEN_ASKED = "handed to its consumer at its next pull"


def error_words(*, error_kind: str, error_message: str, status_code: int | None) -> str:
    """One attempt's failure in plain words ("" for a success).

    A status answer is its status; a connection failure says what the
    socket said ("Connection refused"), never an exception's class name.
    """
    if status_code is not None and not is_success(status_code):
        return status_words(status_code)
    if not error_kind:
        return ""
    message = (error_message or "").strip()
    if error_kind == ErrorKind.LEASE_EXPIRED and message == PULL_LEASE_LOST:
        return PULL_KIND_WORDS[error_kind]
    if error_kind == ErrorKind.CONNECTION:
        lowered = message.lower()
        if any(marker in lowered for marker in _REFUSED_MARKERS):
            return "Connection refused"
        if "reset" in lowered:
            return "Connection reset by the receiver"
        if "disconnected" in lowered or "closed" in lowered:
            return "The receiver closed the connection before answering"
        if message and not _EXCEPTION.match(message):
            return message  # the transport's own words (dispatch/transport.py)
    label = KIND_WORDS.get(error_kind, error_kind.replace("_", " ").capitalize())
    if _EXCEPTION.match(message) or error_kind in _LABEL_ONLY:
        # A Python exception's text is not for merchants; these kinds' detail
        # says the label again.
        return label
    return f"{label}: {message}" if message else label


def last_error_words(*, last_error: str, status_code: int | None) -> str:
    """A delivery's last_error column ("http 500", or "kind: message") in words."""
    if status_code is None:
        stored = _HTTP_ERROR.fullmatch((last_error or "").strip())
        status_code = int(stored.group(1)) if stored else None
    if status_code is not None and not is_success(status_code):
        return status_words(status_code)
    kind, _, message = (last_error or "").partition(": ")
    if kind in KIND_WORDS:
        return error_words(error_kind=kind, error_message=message, status_code=None)
    return last_error


# What happens to a due row: the claim takes it once its endpoint and its
# merchant are under their caps on sends at once (deliveries/dispatch), which
# a merchant with a backlog may not be at the next claim.
SENT_WHEN_ROOM = "sent as soon as its endpoint and merchant have a send slot free"


def pull_error_words(*, error_kind: str, status_code: int | None = None) -> str:
    """An attempt's failure on a pull endpoint when only its kind is known
    (a count by kind, a delivery's last_error)."""
    if error_kind in PULL_KIND_WORDS:
        return PULL_KIND_WORDS[error_kind]
    return error_words(error_kind=error_kind, error_message="", status_code=status_code)


def pull_last_error_words(*, last_error: str) -> str:
    """A pull endpoint's delivery's last_error in words (nothing answered
    with a status: a consumer acks or nacks)."""
    kind = (last_error or "").partition(": ")[0]
    if kind in PULL_KIND_WORDS:
        return PULL_KIND_WORDS[kind]
    return last_error_words(last_error=last_error, status_code=None)


def _when_due(held) -> str:
    """What becomes of a due row: sent when there is room, or, on a pull
    endpoint (deliveries.ops.held marks it), handed out at the next pull."""
    return PULLED_WHEN_ASKED if getattr(held, "pulled", False) else SENT_WHEN_ROOM


def attempt_progress(*, attempts_used: int, max_attempts: int) -> str:
    """ "Retrying (3 of 10)": the attempt that comes next, of the budget."""
    return f"Retrying ({min(attempts_used + 1, max_attempts)} of {max_attempts})"


def stop_reason(*, status: str, attempts: Sequence, attempts_used: int) -> str:
    """Why a dead delivery is not retried ("" unless it is dead).

    Read from its last attempt, which recorded the verdict when it was made:
    a later change of the endpoint's permanent statuses or max attempts does
    not rewrite history.
    """
    if status != "dead":
        return ""
    last = attempts[-1] if attempts else None
    if last is None:
        return "Not retried: it has no attempt on record."
    if last.outcome == "gone":
        return (
            "Delivery stopped: the receiver answered 410 Gone, so the endpoint "
            "was disabled. Enable it and replay once the receiver is back."
        )
    if last.error_kind == ErrorKind.PERMANENT_STATUS:
        return (
            f"Not retried because the receiver answered "
            f"{status_words(last.status_code)}, a status this endpoint treats as "
            "permanent. Fix the receiver, then replay."
        )
    if last.error_kind == ErrorKind.DESTINATION_BLOCKED:
        why = f" ({last.error_message})" if last.error_message else ""
        return (
            f"Not retried because the destination is refused{why}: change the "
            "endpoint's URL, then replay."
        )
    failure = error_words(
        error_kind=last.error_kind,
        error_message=last.error_message,
        status_code=last.status_code,
    )
    used = max(attempts_used, 1)
    budget = "its only attempt failed" if used == 1 else f"all {used} attempts failed"
    fixed = "broker" if last.error_kind in _BROKER_KINDS else "receiver"
    return (
        f"Not retried because {budget} (last: {failure or 'failed'}), the most "
        f"it was allowed. Replay it once the {fixed} is fixed."
    )


def pull_stop_reason(
    *, status: str, attempts: Sequence, attempts_used: int, last_error: str
) -> str:
    """stop_reason for a pull endpoint's delivery, which may also have gone
    dead unpulled when its listen session ended or overflowed."""
    if status == "dead" and last_error == ErrorKind.LISTEN_ENDED:
        return (
            "Not retried: its listen session ended before its consumer acked "
            "it, and nothing pulls an ended session."
        )
    if status == "dead" and last_error == ErrorKind.LISTEN_BACKLOG_FULL:
        return (
            "Not retried: its listen session held more unfinished messages "
            "than a session may, and this was among the oldest."
        )
    return stop_reason(status=status, attempts=attempts, attempts_used=attempts_used)


def _deliveries(n: int, singular: str, plural: str) -> str:
    return f"{n} held {'delivery ' + singular if n == 1 else 'deliveries ' + plural}"


def reenable_message(*, due: int, in_flight: int, rate_limit: float | None) -> str:
    """What "Re-enable and retry held deliveries" did, from the rows it left."""
    if not due and not in_flight:
        return "Endpoint enabled. No delivery was waiting for it."
    parts = ["Endpoint enabled"]
    if due:
        line = _deliveries(due, "is", "are") + " due now: the dispatchers send "
        line += "it next" if due == 1 else "them next"
        if rate_limit and due > 1:
            seconds = math.ceil(due / rate_limit)
            line += (
                f", at most {rate_limit:g} a second (its rate limit), so the last "
                f"goes in about {seconds} s"
            )
        parts.append(line)
    if in_flight:
        parts.append(
            f"{in_flight} {'is' if in_flight == 1 else 'are'} being sent already"
        )
    return "; ".join(parts) + "."


def replay_message(*, delivery_id: str, held) -> str:
    """What a replay did, from the replayed row's held reason (deliveries.ops.held)."""
    if held is None or held.reason in ("due", "scheduled"):
        return f"Replayed {delivery_id}: it is due now, {_when_due(held)}."
    yet = "handed out" if getattr(held, "pulled", False) else "sent"
    return f"Replayed {delivery_id}: it is pending, but not {yet} yet. {held.text}."


def retry_now_refusal(held) -> str:
    """Why a pending delivery cannot be sent now ("" when it can)."""
    if held is None:
        return "Only a pending delivery can be retried now; replay a finished one."
    reason = str(held.reason)
    if reason == "in_flight":
        if getattr(held, "pulled", False):
            return "It is leased to its consumer now."
        return "It is being sent now."
    if reason == "merchant_disabled":
        return (
            "The merchant is switched off: nothing is sent for it until staff "
            "switch it on again."
        )
    if reason == "endpoint_disabled":
        return (
            "The endpoint is disabled: nothing is sent to it until it is enabled again."
        )
    if reason == "awaiting_verification":
        return (
            "The endpoint is waiting for verification: nothing else is sent to "
            "it until it has echoed its challenge."
        )
    if reason == "breaker_open":
        return (
            f"The endpoint is paused: {held.text[0].lower()}{held.text[1:]}. Nothing "
            "is sent to it before then."
        )
    if reason == "breaker_half_open":
        return (
            "A test delivery is deciding whether sending resumes: wait for its answer."
        )
    return ""


def retry_now_message(held) -> str:
    """What "Retry now" did, from the row's held reason after it."""
    if held is not None and str(held.reason) == "rate_limit":
        return f"It is due now, but the rate limit holds it: {held.text}."
    return f"It is due now, without waiting for its retry time: {_when_due(held)}."


def enable_message(*, due: int, later: int) -> str:
    """What "Enable" did (held deliveries keep their retry times)."""
    said = "Endpoint enabled: sending starts again."
    if due:
        said += f" {due} pending deliver{'y is' if due == 1 else 'ies are'} due now."
    if later:
        said += (
            f" {later} wait{'s' if later == 1 else ''} for "
            f"{'its' if later == 1 else 'their'} retry time."
        )
    return said


def pull_enable_message(*, due: int, later: int) -> str:
    """What "Enable" did to a pull endpoint (its messages keep their times)."""
    said = "Endpoint enabled: its consumer gets its messages again."
    if due:
        said += (
            f" {due} pending message{' is' if due == 1 else 's are'} due now, "
            f"{PULLED_WHEN_ASKED}."
        )
    if later:
        said += (
            f" {later} wait{'s' if later == 1 else ''} for "
            f"{'its' if later == 1 else 'their'} retry time."
        )
    return said


def lane_note(*, status: str, ordering_key: str, out_of_order: bool) -> str:
    """What its ordered lane (deliveries/lanes.py) did with a delivery, or "":
    a dead letter was skipped in order (the later events of its key went on
    without it); a replay of one went out of order."""
    if out_of_order:
        return "Replayed out of order: sent at once, not in its ordering key's turn."
    if ordering_key and status == "dead":
        return (
            f"Skipped in order: the later events of ordering key {ordering_key!r} "
            "went on without it."
        )
    return ""


def replay_lane_warning(*, ordering_key: str) -> str:
    """Said next to a replay button of a delivery sent in order, or ""."""
    if not ordering_key:
        return ""
    return (
        f"It was sent in order (ordering key {ordering_key!r}): a replay sends it "
        "at once, out of order, whatever its key's later events are doing."
    )


def answer_not_kept(response_body: str) -> bool:
    """An attempt that answered a verification challenge: no body or headers kept."""
    return response_body == ANSWER_NOT_KEPT
