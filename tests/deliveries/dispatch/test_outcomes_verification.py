"""A verification's answer: only an echo of the challenge verifies, and the
challenge is never kept in the attempt record, even when a receiver reflects
the request it got."""

from __future__ import annotations

import json
import random

import pytest

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.outcomes import CHALLENGE_HIDDEN
from deliveries.dispatch.transport import OutgoingRequest, SendResult
from deliveries.models import Attempt, ErrorKind
from endpoints.models import Endpoint
from tests.support import factories
from tests.support.fakes import FakeClock

pytestmark = [pytest.mark.django_db(transaction=True)]


class Answering:
    """Answers each request as `answer(challenge, body)` says."""

    def __init__(self, answer) -> None:
        self.answer = answer

    def send(self, request: OutgoingRequest) -> SendResult:
        challenge = json.loads(request.body)["data"]["challenge"]
        status, body = self.answer(challenge, request.body.decode())
        return SendResult(
            status_code=status,
            duration_ms=3.0,
            body_excerpt=body,
            response_headers=(("X-Echo", body[:80]),),
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
    kept = json.dumps([attempt.response_body, attempt.response_headers])
    assert endpoint.verification_challenge not in kept
    assert CHALLENGE_HIDDEN in kept


def test_an_echo_verifies_and_is_kept_hidden(awaiting):
    run(Answering(lambda c, body: (200, json.dumps({"challenge": c}))))
    endpoint = Endpoint.objects.get(pk=awaiting.pk)
    assert not endpoint.awaiting_verification
    attempt = Attempt.objects.get()
    assert (attempt.outcome, attempt.error_kind) == ("succeeded", "")
    assert attempt.response_body == json.dumps({"challenge": CHALLENGE_HIDDEN})


def test_a_2xx_without_the_challenge_has_its_own_error_kind(awaiting):
    run(Answering(lambda c, body: (204, "")))
    attempt = Attempt.objects.get()
    assert attempt.error_kind == ErrorKind.CHALLENGE_NOT_ECHOED
    assert Endpoint.objects.get(pk=awaiting.pk).awaiting_verification
