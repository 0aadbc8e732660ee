"""Endpoint auth through the real dispatcher stack (Dispatcher, KindSender,
AuthorizingSender, AsyncSender) on PostgreSQL, a real token server and a
real receiver: the token reaches the receiver, the attempt records only that
an Authorization was sent, and a failing token server is an auth_failed
attempt, retried."""

from __future__ import annotations

import random

import pytest

from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.endpoint_auth import TOKEN_BODY_LIMIT, AuthorizingSender
from deliveries.dispatch.transport import AsyncSender
from deliveries.models import Attempt, Delivery
from deliveries.retry import Verdict, classify
from deliveries.services import event_publish
from tests.support import factories
from tests.support.token_server import TokenServer, json_reply

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT_SECRET = "d1spatcher-cl1ent-secret"


def dispatcher() -> Dispatcher:
    options = {"timeout": 5, "allow_private": True}
    sender = KindSender(
        http=AuthorizingSender(
            http=AsyncSender(body_limit=1024, **options),
            tokens=AsyncSender(body_limit=TOKEN_BODY_LIMIT, **options),
        ),
        **options,
    )
    return Dispatcher(
        worker_id="w-auth",
        sender=sender,
        batch_size=10,
        concurrency=4,
        lease_seconds=60,
        rand=random.Random(5),
    )


def oauth2_endpoint(url: str, token_url: str):
    endpoint = factories.endpoint(url=url)
    endpoint.auth_type = "oauth2"
    endpoint.auth_settings = {"token_url": token_url, "client_id": "relay"}
    endpoint.auth_secret = CLIENT_SECRET
    endpoint.credentials_changed()
    endpoint.save()
    return endpoint


def run_once() -> None:
    worker = dispatcher()
    worker.run_once()
    worker.close()


def test_a_delivery_carries_the_token_and_its_attempt_records_it_redacted(receiver):
    with TokenServer() as tokens:
        endpoint = oauth2_endpoint(receiver.url, tokens.url)
        event_publish(merchant=endpoint.merchant, type="a", data={})

        run_once()

        assert tokens.count == 1
    [got] = receiver.wait_for(1)
    assert got.headers["Authorization"] == "Bearer tok-1"
    attempt = Attempt.objects.get()
    assert attempt.outcome == "succeeded"
    recorded = dict(attempt.request_headers)
    assert recorded["Authorization"] == "Bearer (redacted)"
    framing = {"Host", "Content-Length"}
    on_the_wire = [name for name in got.headers if name not in framing]
    assert [name for name, _ in attempt.request_headers] == on_the_wire
    assert "tok-1" not in repr(attempt.request_headers)


def test_a_failing_token_server_is_an_auth_failed_attempt_retried(receiver):
    with TokenServer() as tokens:
        tokens.answer = lambda _r: json_reply(500, error="server_error")
        endpoint = oauth2_endpoint(receiver.url, tokens.url)
        event_publish(merchant=endpoint.merchant, type="a", data={})

        run_once()

        assert tokens.count == 1
    attempt = Attempt.objects.get()
    assert (attempt.error_kind, attempt.status_code) == ("auth_failed", None)
    assert attempt.error_message == (
        f"the token server 127.0.0.1:{tokens.port} answered 500 (error server_error)"
    )
    assert attempt.outcome == "retry"
    assert Delivery.objects.get().status == "pending"
    assert receiver.received == []
    assert CLIENT_SECRET not in repr(attempt.request_headers)


def test_classify_retries_auth_failed():
    verdict = classify(status_code=None, error_kind="auth_failed")

    assert verdict == Verdict.RETRY
