"""The words of a pull endpoint's deliveries (deliveries/words.py), where a
send's would not be true: a consumer leases, acks and nacks; nothing is sent."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deliveries import words
from deliveries.models import ErrorKind
from deliveries.ops.held import Held, HeldKind


def held(reason: HeldKind, text: str = "", *, pulled: bool) -> Held:
    return Held(reason, text, None, pulled)


@pytest.mark.parametrize(
    ("pulled", "said"),
    [
        (
            True,
            "Replayed dlv_1: it is due now, handed to its consumer at its next pull.",
        ),
        (
            False,
            "Replayed dlv_1: it is due now, sent as soon as its endpoint and "
            "merchant have a send slot free.",
        ),
    ],
)
def test_a_replay_says_who_takes_it_next(pulled, said):
    got = words.replay_message(
        delivery_id="dlv_1", held=held(HeldKind.DUE, pulled=pulled)
    )
    assert got == said


def test_a_replay_held_on_a_pull_endpoint_is_not_handed_out_yet():
    on_hold = held(
        HeldKind.ENDPOINT_DISABLED, "Held: the endpoint is disabled", pulled=True
    )
    assert words.replay_message(delivery_id="dlv_1", held=on_hold) == (
        "Replayed dlv_1: it is pending, but not handed out yet. Held: the endpoint "
        "is disabled."
    )


@pytest.mark.parametrize(
    ("pulled", "said"),
    [(True, "It is leased to its consumer now."), (False, "It is being sent now.")],
)
def test_retry_now_is_refused_for_a_row_in_flight(pulled, said):
    assert words.retry_now_refusal(held(HeldKind.IN_FLIGHT, pulled=pulled)) == said


@pytest.mark.parametrize(
    ("last_error", "attempts", "said"),
    [
        (
            ErrorKind.LISTEN_ENDED,
            [],
            "Not retried: its listen session ended before its consumer acked it, "
            "and nothing pulls an ended session.",
        ),
        (
            ErrorKind.LISTEN_BACKLOG_FULL,
            [],
            "Not retried: its listen session held more unfinished messages than "
            "a session may, and this was among the oldest.",
        ),
        (
            ErrorKind.NACKED,
            [
                SimpleNamespace(
                    outcome="dead",
                    error_kind=ErrorKind.NACKED,
                    error_message="",
                    status_code=None,
                )
            ],
            "Not retried because its only attempt failed (last: The consumer gave "
            "it back (nack)), the most it was allowed. Replay it once the receiver "
            "is fixed.",
        ),
    ],
)
def test_a_dead_pulled_message_says_why(last_error, attempts, said):
    got = words.pull_stop_reason(
        status="dead", attempts=attempts, attempts_used=1, last_error=last_error
    )
    assert got == said


@pytest.mark.parametrize(
    ("due", "later", "said"),
    [
        (0, 0, "Endpoint enabled: its consumer gets its messages again."),
        (
            1,
            0,
            "Endpoint enabled: its consumer gets its messages again. 1 pending "
            "message is due now, handed to its consumer at its next pull.",
        ),
        (
            3,
            2,
            "Endpoint enabled: its consumer gets its messages again. 3 pending "
            "messages are due now, handed to its consumer at its next pull. 2 wait "
            "for their retry time.",
        ),
    ],
)
def test_enabling_a_pull_endpoint_says_what_is_due(due, later, said):
    assert words.pull_enable_message(due=due, later=later) == said


@pytest.mark.parametrize(
    ("last_error", "said"),
    [
        (ErrorKind.LEASE_EXPIRED, words.PULL_KIND_WORDS[ErrorKind.LEASE_EXPIRED]),
        (ErrorKind.NACKED, "The consumer gave it back (nack)"),
        ("", ""),
    ],
)
def test_a_pulled_messages_last_error_in_words(last_error, said):
    assert words.pull_last_error_words(last_error=last_error) == said
