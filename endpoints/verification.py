"""Endpoint ownership verification: an endpoint proves it wants the traffic.

With REQUIRE_ENDPOINT_VERIFICATION (or the merchant's override) a new
endpoint, or one whose URL changes, is awaiting verification: the claim
takes none of its deliveries (they wait, spending no attempt) but the one a
dispatcher makes to carry a fresh challenge in a signed
`relay.endpoint.verification` event (deliveries/verification.py). It is
verified when the receiver answers 2xx with the challenge in its body, when
the merchant pastes the challenge from the receiver's log, or when staff with
the permission mark it. Its held deliveries are then due at once, in publish
order (their due times were never moved).

The challenge is a secret: encrypted in the column like a signing secret,
compared in constant time, gone once verified. Pasting it is not a way to
guess it: WRONG_ANSWERS_LIMIT wrong pastes spend a challenge, and nothing
kept of a receiver's answer to it can be read back (dispatch/outcomes.py).
"""

from __future__ import annotations

import hmac
import json
import math
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from endpoints.models import Endpoint, Merchant
from relayproject.lib.limits import LimitExceeded

CHALLENGE_PREFIX = "vrfy_"
# Longest challenge (or JSON answer carrying it) looked at in a body: the
# transport already keeps at most RESPONSE_BODY_LIMIT_BYTES of it.
ECHO_LIMIT_BYTES = 1024
BY_RECEIVER = "receiver"
# Wrong pastes of one challenge (API and portal) before it is spent: then no
# paste, even the right one, verifies until a new challenge is asked for.
WRONG_ANSWERS_LIMIT = 5
WRONG_CHALLENGE = "This is not the current challenge of this endpoint."
NEW_CHALLENGE_NEEDED = "ask for a new challenge and paste that one."
CHALLENGE_SPENT = (
    f"This challenge has had {WRONG_ANSWERS_LIMIT} wrong answers and can no "
    f"longer be pasted: {NEW_CHALLENGE_NEEDED}"
)

# Fields a (re)started verification writes, for save(update_fields=...).
REQUEST_FIELDS = [
    "awaiting_verification",
    "verification_challenge",
    "verification_delivery_id",
    "verification_requested_at",
    "verification_wrong_answers",
    "verified_at",
    "verified_by",
    "updated_at",
]


class TooSoon(LimitExceeded):
    """A challenge was asked for less than VERIFICATION_RETRY_SECONDS ago (the
    API answers 429 with Retry-After)."""

    def __init__(self, retry_after: float) -> None:
        wait = settings.VERIFICATION_RETRY_SECONDS
        super().__init__(
            setting="VERIFICATION_RETRY_SECONDS",
            limit=wait,
            detail=f"A challenge was sent less than {wait:g} s ago: ask again "
            f"in {math.ceil(retry_after)} s.",
            retry_after=retry_after,
        )


class NotAwaiting(Exception):
    """The endpoint is not awaiting verification: nothing to retry or paste."""


def required(merchant: Merchant) -> bool:
    """Whether this merchant's new endpoints (and changed URLs) must be verified."""
    if merchant.require_endpoint_verification is not None:
        return merchant.require_endpoint_verification
    return settings.REQUIRE_ENDPOINT_VERIFICATION


def challenge_new() -> str:
    return CHALLENGE_PREFIX + secrets.token_urlsafe(32)


def challenge_matches(expected: str | None, given: str | bytes) -> bool:
    """Constant-time comparison of a candidate with the stored challenge."""
    if not expected:
        return False
    if isinstance(given, str):
        given = given.encode("utf-8", "replace")
    return hmac.compare_digest(expected.encode(), given.strip())


def echoed(body: str | bytes | None, challenge: str | None) -> bool:
    """Whether a receiver's body echoes the challenge: the challenge alone, or
    a JSON object whose "challenge" is it. The body is hostile: only its first
    ECHO_LIMIT_BYTES are looked at, and a JSON parse is tried only on those."""
    if not body or not challenge:
        return False
    if isinstance(body, str):
        body = body.encode("utf-8", "replace")
    body = body[:ECHO_LIMIT_BYTES].strip()
    if body.startswith(b"{"):
        try:
            answer = json.loads(body)
        except ValueError:
            return False
        given = answer.get("challenge") if isinstance(answer, dict) else None
        return isinstance(given, str) and challenge_matches(challenge, given)
    return challenge_matches(challenge, body)


def state(endpoint: Endpoint) -> str:
    """ "awaiting", "verified" or "not_required" (never asked), for every face."""
    if endpoint.awaiting_verification:
        return "awaiting"
    return "verified" if endpoint.verified_at else "not_required"


def request_fields_set(endpoint: Endpoint, *, now: datetime) -> None:
    """Put a fresh challenge on the endpoint (not saved): the next dispatcher
    to look sends it, and its deliveries wait from now on."""
    endpoint.awaiting_verification = True
    endpoint.verification_challenge = challenge_new()
    endpoint.verification_delivery_id = ""
    endpoint.verification_requested_at = now
    endpoint.verification_wrong_answers = 0
    endpoint.verified_at = None
    endpoint.verified_by = ""


def verification_retry(*, endpoint: Endpoint, now: datetime) -> Endpoint:
    """A fresh challenge, sent by the next dispatcher; the old one stops
    counting. Raises NotAwaiting, or TooSoon within VERIFICATION_RETRY_SECONDS
    of the last one."""
    with transaction.atomic():
        row = Endpoint.objects.select_for_update().get(
            pk=endpoint.pk, merchant_id=endpoint.merchant_id
        )
        if not row.awaiting_verification:
            raise NotAwaiting("This endpoint is not awaiting verification.")
        last = row.verification_requested_at
        wait = settings.VERIFICATION_RETRY_SECONDS
        if last is not None and now < last + timedelta(seconds=wait):
            raise TooSoon((last + timedelta(seconds=wait) - now).total_seconds())
        request_fields_set(row, now=now)
        row.save(update_fields=REQUEST_FIELDS)
    return row


def endpoint_verify(
    *, endpoint: Endpoint, challenge: str, by: str, now: datetime
) -> Endpoint:
    """Verify with a challenge pasted from the receiver's log. Each paste
    spends one of the challenge's WRONG_ANSWERS_LIMIT tries; a wrong one is a
    ValidationError on "challenge" saying how many are left (or that a new
    challenge is needed), and changes nothing but that count."""
    with transaction.atomic():
        # One statement checks that a try is left and spends it: two pastes at
        # once both count (the second waits on the row lock, then re-reads the
        # count), where reading the count and then writing it would lose one.
        counted = Endpoint.objects.filter(
            pk=endpoint.pk,
            merchant_id=endpoint.merchant_id,  # one shard on Citus
            awaiting_verification=True,
            verification_wrong_answers__lt=WRONG_ANSWERS_LIMIT,
        ).update(verification_wrong_answers=F("verification_wrong_answers") + 1)
        row = Endpoint.objects.get(pk=endpoint.pk, merchant_id=endpoint.merchant_id)
        if not row.awaiting_verification:
            raise NotAwaiting("This endpoint is not awaiting verification.")
        if (
            counted
            and len(challenge) <= ECHO_LIMIT_BYTES
            and challenge_matches(row.verification_challenge, challenge)
        ):
            _verified(row, by=by, now=now)
            return row
    # Raised after the commit: the try this paste spent stays spent.
    words = wrong_answer_words(row) if counted else CHALLENGE_SPENT
    raise ValidationError({"challenge": [words]})


def wrong_answer_words(row: Endpoint) -> str:
    """What a wrong paste is told: how many tries its challenge has left."""
    left = tries_left(row)
    if left == 0:
        return (
            f"{WRONG_CHALLENGE} That was the last of its {WRONG_ANSWERS_LIMIT} "
            f"tries: {NEW_CHALLENGE_NEEDED}"
        )
    return f"{WRONG_CHALLENGE} {left} {'try' if left == 1 else 'tries'} left."


def tries_left(endpoint: Endpoint) -> int:
    """Pastes the endpoint's current challenge has left."""
    return max(0, WRONG_ANSWERS_LIMIT - endpoint.verification_wrong_answers)


def endpoint_mark_verified(*, endpoint: Endpoint, by: str, now: datetime) -> bool:
    """Staff vouch for it; False when it was not awaiting verification."""
    with transaction.atomic():
        row = Endpoint.objects.select_for_update().get(
            pk=endpoint.pk, merchant_id=endpoint.merchant_id
        )
        if not row.awaiting_verification:
            return False
        _verified(row, by=by, now=now)
    return True


def endpoints_verified_by_echo(
    sent: list[tuple[str, int | None, str]], *, now: datetime
) -> int:
    """(endpoint, merchant, delivery) whose receiver echoed the challenge that
    delivery carried. Only the endpoint's current verification delivery
    counts: an answer to a challenge since replaced (a URL change, a retry)
    verifies nothing. Runs in the recorder's transaction: SQL only."""
    done = 0
    for endpoint_id, merchant_id, delivery_id in sent:
        rows = Endpoint.objects.filter(
            pk=endpoint_id,
            awaiting_verification=True,
            verification_delivery_id=delivery_id,
        )
        if merchant_id is not None:
            rows = rows.filter(merchant_id=merchant_id)  # one shard on Citus
        done += rows.update(**_verified_columns(by=BY_RECEIVER, now=now))
    return done


def _verified_columns(*, by: str, now: datetime) -> dict:
    return {
        "awaiting_verification": False,
        "verification_challenge": None,
        "verification_wrong_answers": 0,
        "verified_at": now,
        "verified_by": by[:200],
        "updated_at": now,
    }


def _verified(row: Endpoint, *, by: str, now: datetime) -> None:
    columns = _verified_columns(by=by, now=now)
    for name, value in columns.items():
        setattr(row, name, value)
    row.save(update_fields=list(columns))
