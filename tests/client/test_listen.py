"""`webhook-relay-client listen` as a developer runs it: a real process
against a live relay (gunicorn on 127.0.0.1), forwarding to a receiver on
127.0.0.1 that verifies each webhook with the standardwebhooks package and
the secret `listen` printed.

The relay runs with LISTEN_IDLE_SECONDS short, so a killed `listen` leaves a
session that a dispatcher ends within seconds; a live one pulls at least
once a second and stays alive.
"""

from __future__ import annotations

import re
import signal
import threading
import uuid

import pytest
from webhook_relay_client import Client

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.pull.sessions import ENDED_REASONS
from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint, Merchant
from tests.acceptance.test_web_processes import Web
from tests.support import factories
from tests.support.fakes import Receiver
from tests.support.listening import ListenProcess, VerifyingResponder
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

IDLE_SECONDS = 3  # the relay's LISTEN_IDLE_SECONDS in this module


@pytest.fixture(scope="module")
def relay(django_db_setup, tmp_path_factory):
    # The conftest's relay, with sessions that idle out in seconds: gunicorn
    # reads its settings from the environment it is started with.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LISTEN_IDLE_SECONDS", str(IDLE_SECONDS))
        server = Web(tmp_path_factory.mktemp("relay"), workers=1)
    try:
        wait_until(server.up, timeout=60, what="gunicorn to answer /healthz")
        yield server
    finally:
        server.close()


@pytest.fixture
def merchant_key(relay_client) -> tuple[str, str]:
    """A merchant of this run's own, retrying a nack after a second, and a
    key scoped to it (what a developer runs `listen` with)."""
    merchant = factories.merchant(f"listen-{uuid.uuid4().hex[:10]}")
    Merchant.objects.filter(pk=merchant.pk).update(retry_schedule=[1])
    _, key = apikey_create(name="listen", merchant=merchant)
    return merchant.slug, key


@pytest.fixture
def start_listen(relay, merchant_key, tmp_path):
    started: list[ListenProcess] = []
    slug, key = merchant_key

    def start(forward_to: str, *args: str, api_key: str = key) -> ListenProcess:
        process = ListenProcess(
            relay_url=relay.url("/"),
            api_key=api_key,
            merchant=slug,
            forward_to=forward_to,
            args=args,
            stderr=tmp_path / f"listen-{len(started)}.err",
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()


def publish(client: Client, slug: str, type: str = "order.created", **data) -> str:
    return client.publish(merchant=slug, type=type, data=data).id


def test_events_published_after_it_starts_arrive_verified(
    relay_client, merchant_key, start_listen
):
    slug, key = merchant_key
    responder = VerifyingResponder()
    with Receiver(responder) as receiver:
        listen = start_listen(receiver.url, "--events", "order.*")
        session_id, responder.secret = listen.started()
        assert key not in "\n".join(listen.lines) + listen.stderr

        skipped = publish(relay_client, slug, "invoice.paid")
        events = [publish(relay_client, slug, n=n, name="Zoë ☃") for n in range(3)]
        for event_id in events:
            listen.wait_for_line(rf"  order\.created  {event_id}  -> 204  \d+ ms$")

    assert sorted(c.webhook_id for c in responder.checked) == sorted(events)
    assert all(c.verified and c.attempt == 1 for c in responder.checked)
    wait_until(
        lambda: (
            Delivery.objects.filter(
                endpoint_id=session_id, status=Delivery.Status.SUCCEEDED
            ).count()
            == 3
        ),
        timeout=10,
        what="the three deliveries acked",
    )
    # --events made the session's filter: the invoice was never its delivery.
    assert not Delivery.objects.filter(event_id=skipped, endpoint_id=session_id)


def test_a_500_from_the_local_receiver_is_nacked_and_retried(
    relay_client, merchant_key, start_listen
):
    slug, _ = merchant_key
    responder = VerifyingResponder(failing=500)
    with Receiver(responder) as receiver:
        listen = start_listen(receiver.url)
        session_id, responder.secret = listen.started()
        event_id = publish(relay_client, slug)
        listen.wait_for_line(rf"  {event_id}  -> 500  \d+ ms$")
        listen.wait_for_line(rf"  {event_id} \(attempt 2\)  -> 204  \d+ ms$")

    assert [(c.attempt, c.verified, c.status) for c in responder.checked] == [
        (1, True, 500),
        (2, True, 204),
    ]
    delivery = Delivery.objects.get(event_id=event_id, endpoint_id=session_id)
    wait_until(
        lambda: Delivery.objects.filter(
            pk=delivery.pk, status=Delivery.Status.SUCCEEDED
        ).exists(),
        timeout=10,
        what="the retry acked",
    )
    attempts = Attempt.objects.filter(delivery_id=delivery.pk).order_by("number")
    assert [a.error_kind for a in attempts] == [ErrorKind.NACKED, ""]


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"]
)
def test_ctrl_c_ends_the_session_and_exits_0(
    relay_client, merchant_key, start_listen, signum
):
    slug, _ = merchant_key
    with Receiver(VerifyingResponder()) as receiver:
        listen = start_listen(receiver.url)
        session_id, _ = listen.started()
        listen.signal(signum)
        assert listen.wait() == 0, listen.stderr

    assert listen.lines[-1] == (
        f"Stopped: listen session {session_id} ended; 0 acked, 0 nacked."
    )
    session = relay_client.listen_session_get(slug, session_id)
    assert (session.state, session.ended_reason) == ("ended", ENDED_REASONS["stopped"])
    assert not Endpoint.objects.get(pk=session_id).is_active


def test_a_message_in_hand_at_ctrl_c_is_finished_before_the_session_ends(
    relay_client, merchant_key, start_listen
):
    slug, _ = merchant_key
    responder = VerifyingResponder()
    responder.hold = threading.Event()
    with Receiver(responder) as receiver:
        listen = start_listen(receiver.url)
        session_id, responder.secret = listen.started()
        event_id = publish(relay_client, slug)
        # The handler has it and holds its answer while listen is told to stop.
        assert responder.arrived.wait(timeout=15)
        listen.signal(signal.SIGINT)
        responder.hold.set()
        assert listen.wait() == 0, listen.stderr

    delivered, last = listen.lines[-2:]
    assert re.search(rf"  {event_id}  -> 204  \d+ ms$", delivered)
    assert last == f"Stopped: listen session {session_id} ended; 1 acked, 0 nacked."
    delivery = Delivery.objects.get(event_id=event_id, endpoint_id=session_id)
    assert delivery.status == Delivery.Status.SUCCEEDED


def test_a_killed_listen_leaves_a_session_that_ends_by_itself(
    relay_client, merchant_key, start_listen, dispatchers
):
    slug, _ = merchant_key
    dispatchers.start(
        "--concurrency", "1", env={"LISTEN_IDLE_SECONDS": str(IDLE_SECONDS)}
    )
    with Receiver(VerifyingResponder()) as receiver:
        listen = start_listen(receiver.url)
        session_id, _ = listen.started()
        listen.close()  # SIGKILL: no handler runs, the session is not ended
    assert relay_client.listen_session_get(slug, session_id).state == "live"
    left = publish(relay_client, slug)  # nobody will pull it

    wait_until(
        lambda: relay_client.listen_session_get(slug, session_id).state == "ended",
        timeout=IDLE_SECONDS + 10,
        what="the idle session to be ended by a dispatcher",
    )
    session = relay_client.listen_session_get(slug, session_id)
    assert session.ended_reason == ENDED_REASONS["idle"]
    delivery = Delivery.objects.get(event_id=left, endpoint_id=session_id)
    assert (delivery.status, delivery.last_error) == (
        Delivery.Status.DEAD,
        ErrorKind.LISTEN_ENDED,
    )


def test_a_session_ended_elsewhere_stops_it_with_one_line_and_exit_1(
    relay_client, merchant_key, start_listen
):
    slug, _ = merchant_key
    with Receiver(VerifyingResponder()) as receiver:
        listen = start_listen(receiver.url)
        session_id, _ = listen.started()
        relay_client.listen_session_end(slug, session_id)  # as the portal would
        assert listen.wait() == 1
    assert listen.stderr.splitlines() == [
        f"error: listen session {session_id} has ended on the relay "
        f"({ENDED_REASONS['api']}); start another"
    ]


def test_a_refused_key_is_one_line_and_exit_1(merchant_key, start_listen):
    _, key = merchant_key
    wrong = key[:-4] + "xxxx"
    listen = start_listen("http://127.0.0.1:9/", api_key=wrong)
    assert listen.wait() == 1
    [line] = listen.stderr.splitlines()
    assert line.startswith(
        "error: the relay refused the API key while starting a listen session (401 "
    )
    assert line.endswith("check --api-key or WEBHOOK_RELAY_API_KEY")
    assert wrong not in line and listen.lines == []
