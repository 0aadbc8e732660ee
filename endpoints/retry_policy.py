"""An endpoint's retry policy: what is in force, where it comes from, and the
operator's bounds on what a merchant or endpoint may ask for.

Each of the three values is taken on its own: the endpoint's, else its
merchant's default, else the relay's setting (MAX_ATTEMPTS; the full-jitter
backoff of RETRY_BASE_SECONDS and RETRY_MAX_DELAY_SECONDS; HTTP_TIMEOUT_SECONDS).
The bounds (RETRY_MAX_ATTEMPTS_LIMIT, RETRY_MAX_WINDOW_SECONDS,
HTTP_TIMEOUT_MAX_SECONDS) keep one tenant from holding a delivery, or a send
slot, for as long as it likes; a refusal names the bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

FIELDS = ("retry_schedule", "max_attempts", "timeout_seconds")
MAX_SCHEDULE_LENGTH = 100  # delays listed; the last repeats, so more say nothing

# Where a value in force comes from, in the words the portal shows.
FROM_ENDPOINT = "this endpoint"
FROM_MERCHANT = "your account default"
FROM_RELAY = "the relay's default"


def scheduled_wait(schedule: Sequence[float], failed_attempts: int) -> float:
    """The wait after `failed_attempts` (n >= 1) attempts: schedule[n-1], the
    last repeating (contract section 9)."""
    return float(schedule[min(max(failed_attempts, 1), len(schedule)) - 1])


def window_seconds(schedule: Sequence[float] | None, max_attempts: int) -> float:
    """The longest a delivery can be retried for: the sum of its
    max_attempts - 1 waits (under the full-jitter backoff, each wait's cap)."""
    waits = range(1, max(1, max_attempts))
    if schedule:
        return sum(scheduled_wait(schedule, n) for n in waits)
    base, cap = settings.RETRY_BASE_SECONDS, settings.RETRY_MAX_DELAY_SECONDS
    # 2**n past ~60 only says "the cap" (and overflows a float past 1023).
    return sum(min(cap, base * 2.0 ** min(n, 60)) for n in waits)


@dataclass(frozen=True)
class Policy:
    """The retry policy in force for one endpoint, and each value's source."""

    retry_schedule: list[float] | None  # None: the full-jitter backoff
    max_attempts: int
    timeout_seconds: float
    retry_schedule_from: str
    max_attempts_from: str
    timeout_seconds_from: str


def _pick(own, default, relay) -> tuple:
    if own is not None:
        return own, FROM_ENDPOINT
    if default is not None:
        return default, FROM_MERCHANT
    return relay, FROM_RELAY


def policy_in_force(endpoint) -> Policy:
    """The endpoint's retry policy (reads endpoint.merchant)."""
    merchant = endpoint.merchant
    schedule, schedule_from = _pick(
        endpoint.retry_schedule, merchant.retry_schedule, None
    )
    attempts, attempts_from = _pick(
        endpoint.max_attempts, merchant.max_attempts, settings.MAX_ATTEMPTS
    )
    timeout, timeout_from = _pick(
        endpoint.timeout_seconds,
        merchant.timeout_seconds,
        settings.HTTP_TIMEOUT_SECONDS,
    )
    return Policy(
        retry_schedule=schedule,
        max_attempts=attempts,
        timeout_seconds=timeout,
        retry_schedule_from=schedule_from,
        max_attempts_from=attempts_from,
        timeout_seconds_from=timeout_from,
    )


def schedule_words(schedule: Sequence[float] | None) -> str:
    """A schedule as people read it: "1 s, 2 s, then 2 s each time"."""
    if not schedule:
        return (
            f"backoff with full jitter: up to {settings.RETRY_BASE_SECONDS:g} s "
            f"x 2^n, at most {settings.RETRY_MAX_DELAY_SECONDS:g} s"
        )
    listed = ", ".join(f"{delay:g} s" for delay in schedule)
    return f"{listed}, then {schedule[-1]:g} s each time"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def schedule_errors(schedule: object) -> list[str]:
    """What is wrong with a retry_schedule's shape ([] when nothing; None: unset)."""
    if schedule is None:
        return []
    if not isinstance(schedule, list | tuple) or not schedule:
        return [
            "A list of delays in seconds, e.g. [5, 30, 300]; null for the "
            "relay's backoff."
        ]
    if len(schedule) > MAX_SCHEDULE_LENGTH:
        return [f"At most {MAX_SCHEDULE_LENGTH} delays (the last one repeats)."]
    for delay in schedule:
        if not _is_number(delay) or not delay > 0:
            return [f"Not a delay in seconds above 0: {delay!r}."]
    return []


def policy_errors(
    *,
    retry_schedule: object = None,
    max_attempts: object = None,
    timeout_seconds: object = None,
    window_of: tuple[list[float] | None, int] | None = None,
) -> dict[str, list[str]]:
    """Each given value against its shape and the operator's bounds; with
    `window_of` (the schedule and attempts that would be in force), the total
    retry window too, reported on the field that sets it."""
    errors: dict[str, list[str]] = {}
    if problems := schedule_errors(retry_schedule):
        errors["retry_schedule"] = problems
    limit = settings.RETRY_MAX_ATTEMPTS_LIMIT
    if max_attempts is not None and (
        not _is_number(max_attempts) or not 1 <= max_attempts <= limit
    ):
        errors["max_attempts"] = [
            f"Must be between 1 and {limit} (the RETRY_MAX_ATTEMPTS_LIMIT bound)."
        ]
    most = settings.HTTP_TIMEOUT_MAX_SECONDS
    if timeout_seconds is not None and (
        not _is_number(timeout_seconds) or not 1 <= timeout_seconds <= most
    ):
        errors["timeout_seconds"] = [
            f"Must be from 1 to {most:g} seconds (the HTTP_TIMEOUT_MAX_SECONDS bound)."
        ]
    if window_of is not None and not errors:
        schedule, attempts = window_of
        window = window_seconds(schedule, attempts)
        bound = settings.RETRY_MAX_WINDOW_SECONDS
        if window > bound:
            field = "retry_schedule" if retry_schedule is not None else "max_attempts"
            errors[field] = [
                f"These retries would span {window:g} s, longer than the "
                f"RETRY_MAX_WINDOW_SECONDS bound ({bound:g} s): fewer attempts "
                "or shorter delays."
            ]
    return errors


def endpoint_policy_errors(*, merchant, endpoint, given: dict) -> dict[str, list[str]]:
    """An endpoint's retry values given (endpoint None: a new one), against
    the bounds; when they move its retry window, the window then in force
    (each value given, else its own, else its merchant's, else the relay's)."""
    errors = policy_errors(**given)
    if errors or not {"retry_schedule", "max_attempts"} & set(given):
        return errors

    def in_force(field: str):
        if field in given:
            value = given[field]
        else:
            value = getattr(endpoint, field) if endpoint is not None else None
        return value if value is not None else getattr(merchant, field)

    schedule, attempts = in_force("retry_schedule"), in_force("max_attempts")
    if schedule is None and attempts is None:
        return errors  # the relay's own defaults: the operator's choice
    window_of = (schedule, attempts or settings.MAX_ATTEMPTS)
    return policy_errors(**given, window_of=window_of)


def merchant_defaults_errors(merchant, given: dict) -> dict[str, list[str]]:
    """A merchant's defaults given (merchant None: a new one), against the
    bounds; when they move the retry window, the window of the merchant
    itself and of each of its endpoints that would take a default from it."""
    errors = policy_errors(**given)
    moved = {f for f, v in given.items() if v is not None}
    if errors or not {"retry_schedule", "max_attempts"} & moved:
        return errors
    schedule = given.get(
        "retry_schedule", merchant.retry_schedule if merchant else None
    )
    attempts = given.get("max_attempts", merchant.max_attempts if merchant else None)
    combos: set[tuple] = {(None, None)}
    if merchant is not None:
        # Each endpoint's own values (few: MAX_ENDPOINTS_PER_MERCHANT at most).
        combos |= {
            (tuple(own) if own is not None else None, most)
            for own, most in merchant.endpoints.values_list(
                "retry_schedule", "max_attempts"
            )
            if own is None or most is None  # else nothing of it comes from here
        }
    for own_schedule, own_attempts in combos:
        in_force = list(own_schedule) if own_schedule is not None else schedule
        most = own_attempts or attempts
        if in_force is None and most is None:
            continue  # the relay's own defaults: the operator's choice
        window_of = (in_force, most or settings.MAX_ATTEMPTS)
        if found := policy_errors(**given, window_of=window_of):
            return found
    return errors
