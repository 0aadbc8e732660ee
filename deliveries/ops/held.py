"""Why a delivery that is not finished is not moving, and until when.

One place for the words, so the admin, the API and the portal say the same
thing, in the relay's vocabulary (deliveries/words.py): "Paused after 10
failures, next try 14:07:00 UTC", "Held: the endpoint is disabled", "Held by
the rate limit", "Retrying (3 of 10) at 14:02:10 UTC". The reasons
(``HeldKind``) are the API's machine-stable values. Pure: it reads the
delivery, its endpoint, the endpoint's merchant and health row (select_related
``endpoint__merchant`` and ``endpoint__health`` so a list costs no query per
row) and a `now`. A pull endpoint's row (deliveries/pull/) is never sent: it
waits for its consumer's pull, whatever a breaker or rate limit says, and
its words say so (pull_held).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from deliveries.models import Delivery
from deliveries.words import SENT_WHEN_ROOM, attempt_progress
from endpoints import brokers, ratelimit
from endpoints.models import Endpoint, EndpointHealth
from endpoints.retry_policy import policy_in_force


class HeldKind(StrEnum):
    """Machine-readable reasons (the API's ``held.reason``)."""

    IN_FLIGHT = "in_flight"  # delivering under a lease
    MERCHANT_DISABLED = "merchant_disabled"  # switched off by staff
    ENDPOINT_DISABLED = "endpoint_disabled"
    AWAITING_VERIFICATION = "awaiting_verification"
    BREAKER_OPEN = "breaker_open"
    BREAKER_HALF_OPEN = "breaker_half_open"  # waiting for the probe to answer
    RATE_LIMIT = "rate_limit"
    RETRY_SCHEDULED = "retry_scheduled"  # backoff after a failed attempt
    SCHEDULED = "scheduled"  # not yet due, no attempt made
    DUE = "due"  # due now: a claim takes it once there is room
    IN_LANE = "in_lane"  # behind the head of its ordered lane (deliveries/lanes.py)


# Kinds that are a hold (something outside the delivery stops it) rather
# than ordinary waiting; the admin highlights these.
HOLDS = frozenset(
    {
        HeldKind.MERCHANT_DISABLED,
        HeldKind.ENDPOINT_DISABLED,
        HeldKind.AWAITING_VERIFICATION,
        HeldKind.BREAKER_OPEN,
        HeldKind.BREAKER_HALF_OPEN,
        HeldKind.RATE_LIMIT,
    }
)


@dataclass(frozen=True)
class Held:
    reason: HeldKind
    text: str  # one line for people, e.g. "Paused after 10 failures, next try 14:07:00 UTC"
    until: datetime | None  # when it may move again, when that is known
    pulled: bool = False  # a pull endpoint's: handed out at a pull, never sent

    @property
    def is_hold(self) -> bool:
        return self.reason in HOLDS


SWITCHED_OFF = Held(
    HeldKind.MERCHANT_DISABLED,
    "Held: the merchant is switched off; it is sent once staff switch it on again",
    None,
)


def when(value: datetime, *, now: datetime) -> str:
    """A time as staff read it: seconds and UTC; the date too unless it is today."""
    if value.date() == now.date():
        return value.strftime("%H:%M:%S UTC")
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def human_seconds(seconds: float | None) -> str:
    """A duration as staff read it: "2 h 5 min", "4 min 10 s", "3.2 s"."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{seconds:.1f} s"


def _failures(n: int) -> str:
    return f"{n} failure{'' if n == 1 else 's'}"


def _paused(health: EndpointHealth) -> str:
    # Staff may pause an endpoint by hand, with no failure counted.
    n = health.consecutive_failures
    return f"Paused after {_failures(n)}" if n else "Paused"


def _health(endpoint: Endpoint) -> EndpointHealth | None:
    try:
        return endpoint.health
    except EndpointHealth.DoesNotExist:
        return None


def _rate_wait(endpoint: Endpoint, health: EndpointHealth, now: datetime) -> float:
    """Seconds until the shared bucket has a whole token (0: a send may go now)."""
    rate = endpoint.rate_limit_per_second
    tokens = ratelimit.refill(
        health.rate_tokens, health.rate_updated_at, rate=rate, now=now.timestamp()
    )
    return 0.0 if tokens >= 1.0 else (1.0 - tokens) / rate


def delivery_held(*, delivery: Delivery, now: datetime) -> Held | None:
    """Why `delivery` is not moving, or None when it is finished.

    The checks follow the claim's own order: a switched-off merchant, a
    disabled endpoint and a breaker that is not closed keep the row out of
    every claim whatever its time; the rate limit holds it back after a
    claim; otherwise it waits for its time (a retry's backoff) or is due now.
    """
    if delivery.status in Delivery.Status.FINISHED:
        return None
    if delivery.status == Delivery.Status.WAITING:
        return Held(
            HeldKind.IN_LANE,
            f"Waiting in order: sent once the earlier events of ordering key "
            f"{delivery.ordering_key!r} have succeeded or gone dead",
            None,
        )
    if delivery.endpoint.kind == brokers.PULL:
        return pull_held(delivery=delivery, now=now)
    if delivery.status == Delivery.Status.DELIVERING:
        until = delivery.claimed_until
        worker = delivery.claimed_by or "?"
        if until is not None and until <= now:
            if not delivery.endpoint.merchant.is_active:
                return SWITCHED_OFF  # no claim takes it over until then
            return Held(
                HeldKind.DUE,
                f"Its dispatcher ({worker}) stopped answering at "
                f"{when(until, now=now)}: the next claim takes it over",
                None,
            )
        lease = f" until {when(until, now=now)}" if until else ""
        return Held(
            HeldKind.IN_FLIGHT, f"Being sent now (by {worker}, claimed{lease})", until
        )
    endpoint = delivery.endpoint
    if not endpoint.merchant.is_active:
        return SWITCHED_OFF
    if not endpoint.is_active:
        why = f" ({endpoint.disabled_reason})" if endpoint.disabled_reason else ""
        return Held(
            HeldKind.ENDPOINT_DISABLED,
            f"Held: the endpoint is disabled{why}; it is sent once it is enabled",
            None,
        )
    if (
        endpoint.awaiting_verification
        and delivery.pk != endpoint.verification_delivery_id
    ):
        return Held(
            HeldKind.AWAITING_VERIFICATION,
            "Held: waiting for verification; it is sent once the endpoint "
            "has proved it wants the traffic",
            None,
        )
    health = _health(endpoint)
    if health is not None and health.breaker_state == EndpointHealth.State.OPEN:
        probe = health.next_probe_at
        paused = _paused(health)
        if probe is not None and probe > now:
            text = f"{paused}, next try {when(probe, now=now)}"
        else:
            text = f"{paused}; the next try is due now"
        return Held(HeldKind.BREAKER_OPEN, text, probe)
    if health is not None and health.breaker_state == EndpointHealth.State.HALF_OPEN:
        return Held(
            HeldKind.BREAKER_HALF_OPEN,
            f"{_paused(health)}: one test delivery is being sent, its answer "
            "decides whether sending resumes",
            None,
        )
    if health is not None and endpoint.rate_limit_per_second:
        wait = _rate_wait(endpoint, health, now)
        due_later = delivery.next_attempt_at > now
        # A row the dispatcher sent back for want of a token keeps its attempt
        # count; an empty bucket, or a short hold with no attempt spent, is
        # the rate limit at work.
        if wait > 0 or (due_later and delivery.attempts_in_budget == 0):
            until = max(now + timedelta(seconds=wait), delivery.next_attempt_at)
            return Held(
                HeldKind.RATE_LIMIT,
                f"Held by the rate limit ({endpoint.rate_limit_per_second:g} a "
                f"second) until {when(until, now=now)}",
                until,
            )
    if delivery.next_attempt_at > now:
        at = when(delivery.next_attempt_at, now=now)
        if delivery.attempts_in_budget:
            most = policy_in_force(endpoint).max_attempts
            progress = attempt_progress(
                attempts_used=delivery.attempts_in_budget, max_attempts=most
            )
            return Held(
                HeldKind.RETRY_SCHEDULED,
                f"{progress} at {at}",
                delivery.next_attempt_at,
            )
        return Held(HeldKind.SCHEDULED, f"Due at {at}", delivery.next_attempt_at)
    since = when(delivery.next_attempt_at, now=now)
    return Held(HeldKind.DUE, f"Due now (since {since}): {SENT_WHEN_ROOM}", None)


def pull_held(*, delivery: Delivery, now: datetime) -> Held:
    """Why a pull endpoint's unfinished row is not moving. Only the
    switches and time hold it: a pull leases it (deliveries/pull/leasing.py)
    whatever the breaker, rate limit or verification would say to a send."""
    endpoint = delivery.endpoint
    if not endpoint.merchant.is_active:
        return Held(
            HeldKind.MERCHANT_DISABLED,
            "Held: the merchant is switched off; its consumer gets it once staff "
            "switch it on again",
            None,
            True,
        )
    if delivery.status == Delivery.Status.DELIVERING:
        until = delivery.claimed_until
        if until is not None and until <= now:
            return Held(
                HeldKind.DUE,
                f"Its consumer did not ack or nack it by {when(until, now=now)}: "
                "the next pull hands it out again, the lost lease counted as an "
                "attempt",
                None,
                True,
            )
        lease = f" until {when(until, now=now)}" if until else ""
        return Held(
            HeldKind.IN_FLIGHT,
            f"Leased to its consumer{lease}: it waits for an ack or a nack",
            until,
            True,
        )
    if not endpoint.is_active:
        if endpoint.listen_session:
            why = "its listen session ended; nothing pulls it now"
        else:
            why = "the endpoint is disabled; its consumer gets it once it is enabled"
        return Held(HeldKind.ENDPOINT_DISABLED, f"Held: {why}", None, True)
    at = when(delivery.next_attempt_at, now=now)
    if delivery.next_attempt_at > now and delivery.attempts_in_budget:
        most = policy_in_force(endpoint).max_attempts
        progress = attempt_progress(
            attempts_used=delivery.attempts_in_budget, max_attempts=most
        )
        return Held(
            HeldKind.RETRY_SCHEDULED,
            f"{progress}: handed to its consumer at its first pull from {at}",
            delivery.next_attempt_at,
            True,
        )
    if delivery.next_attempt_at > now:
        return Held(
            HeldKind.SCHEDULED,
            f"Due at {at}: handed to its consumer at its first pull from then",
            delivery.next_attempt_at,
            True,
        )
    return Held(
        HeldKind.DUE,
        f"Due now (since {at}): it waits for its consumer to pull it",
        None,
        True,
    )
