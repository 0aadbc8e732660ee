"""A verification's answer: only an echo of the challenge verifies, and no
body or headers of it are kept in the attempt record, so a receiver that
reflects the request it got cannot hand the challenge to its reader."""

from __future__ import annotations

import json
import random

import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.outcomes import QUOTED_CHALLENGE, quotes_challenge
from deliveries.dispatch.transport import OutgoingRequest, SendResult
from deliveries.models import Attempt, ErrorKind
from deliveries.words import ANSWER_NOT_KEPT, answer_not_kept
from endpoints.models import Endpoint
from tests.support import factories
from tests.support.fakes import FakeClock

pytestmark = [pytest.mark.django_db(transaction=True)]


class Answering:
    """Answers each request as `answer(challenge, body)` says."""

    def __init__(self, answer, error: str = "") -> None:
        self.answer = answer
        self.error = error

    def send(self, request: OutgoingRequest) -> SendResult:
        challenge = json.loads(request.body)["data"]["challenge"]
        status, body = self.answer(challenge, request.body.decode())
        return SendResult(
            status_code=status,
            duration_ms=3.0,
            body_excerpt=body,
            response_headers=(("X-Echo", body[:80]),),
            error_message=self.error.format(challenge=challenge),
        )


def run(sender) -> None:
    worker = Dispatcher(
        worker_id="w",
        sender=sender,
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=FakeClock(),
        rand=random.Random(3),
    )
    worker.run_once()
    worker.close()


@pytest.fixture
def awaiting(settings):
    settings.REQUIRE_ENDPOINT_VERIFICATION = True
    return factories.endpoint()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda c, body: (200, body), id="reflects the request, 200"),
        pytest.param(lambda c, body: (500, c), id="the challenge alone, 500"),
        pytest.param(lambda c, body: (404, f"no route for {body}"), id="error page"),
    ],
)
def test_a_reflecting_receiver_is_not_verified_and_the_challenge_is_not_kept(
    awaiting, answer
):
    run(Answering(answer))
    endpoint = Endpoint.objects.get(pk=awaiting.pk)
    assert endpoint.awaiting_verification
    attempt = Attempt.objects.get()
    assert attempt.outcome == "retry"
    assert attempt.response_body == ANSWER_NOT_KEPT
    assert attempt.response_headers is None
    assert answer_not_kept(attempt.response_body)


def test_an_echo_verifies_and_keeps_no_body(awaiting):
    run(Answering(lambda c, body: (200, json.dumps({"challenge": c}))))
    endpoint = Endpoint.objects.get(pk=awaiting.pk)
    assert not endpoint.awaiting_verification
    attempt = Attempt.objects.get()
    assert (attempt.outcome, attempt.error_kind) == ("succeeded", "")
    assert (attempt.response_body, attempt.response_headers) == (
        ANSWER_NOT_KEPT,
        None,
    )


def test_an_error_message_quoting_part_of_the_challenge_is_not_kept(awaiting):
    run(Answering(lambda c, body: (502, ""), error="bad gateway: {challenge:.47}"))
    attempt = Attempt.objects.get()
    assert attempt.error_message == QUOTED_CHALLENGE


@pytest.mark.parametrize(
    ("text", "quotes"),
    [
        ("vrfy_AbCdEfGh", True),  # the first 8 characters
        ("x VRFY_ABCDEFGH y", True),  # in another case
        ("...dEfGhIjK", True),  # 8 from the middle
        ("vrfy_Ab and CdEfGhI", False),  # 7 in a row, twice
        ("Connection refused (127.0.0.1:9)", False),
        ("", False),
    ],
)
def test_what_counts_as_quoting_the_challenge(text, quotes):
    assert quotes_challenge(text, "vrfy_AbCdEfGhIjKlMn") is quotes


def test_a_2xx_without_the_challenge_has_its_own_error_kind(awaiting):
    run(Answering(lambda c, body: (204, "")))
    attempt = Attempt.objects.get()
    assert attempt.error_kind == ErrorKind.CHALLENGE_NOT_ECHOED
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification
