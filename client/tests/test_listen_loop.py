"""The listen loop against a scripted relay (relay_stub) and a scripted local
receiver, both on 127.0.0.1: what it pulls, forwards, acks and nacks, what
it prints, and when it gives up."""

from __future__ import annotations

import json
import socket
import threading
from datetime import datetime

import pytest
from relay_stub import Sleeps, problem

from webhook_relay_client import Client
from webhook_relay_client.listen import Listener, ListenError

KEY = "rk_live_secret_value"
SESSION = "/api/v1/merchants/acme/endpoints/ep_1"
BODY = '{"id":"evt_1","type":"order.created","timestamp":"2026-12-07T22:40:01.000Z","data":{"name":"Zoë"}}'
HEADERS = {
    "Content-Type": "application/json",
    "webhook-id": "evt_1",
    "webhook-timestamp": "1796683201",
    "webhook-signature": "v1,abc=",
    "X-Relay-Event-Id": "evt_1",
    "X-Relay-Delivery-Id": "dlv_1",
    "X-Relay-Attempt": "1",
}
CREATED = {
    "id": "ep_1",
    "description": "listen session",
    "event_types": ["order.*"],
    "filter": None,
    "state": "live",
    "created_at": "2026-12-07T22:40:00.000Z",
    "expires_at": "2026-12-07T22:41:00.000Z",
    "last_pulled_at": None,
    "ended_reason": "",
    "signing": "v1",
    "public_key": None,
    "secret": "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=",
}
AT = datetime(2026, 12, 7, 23, 40, 1)


def message(n: int = 1, attempt: int = 1) -> dict:
    return {
        "id": f"dlv_{n}",
        "attempt": attempt,
        "headers": HEADERS,
        "body": BODY,
        "lease_expires_at": "2026-12-07T22:40:31.000Z",
    }


class Waits(threading.Event):
    """The listener's stop event, recording each wait instead of waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.waited: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waited.append(timeout)
        return self.is_set()


class Lines(list):
    def __call__(self, line: str) -> None:
        self.append(line)


@pytest.fixture
def lines() -> Lines:
    return Lines()


def listener(relay, local_url: str, lines: Lines, **kwargs) -> Listener:
    client = Client(relay.url, KEY, sleep=Sleeps())
    return Listener(
        client,
        merchant="acme",
        forward_to=local_url,
        stopping=Waits(),
        out=lines,
        clock=lambda: AT,
        **kwargs,
    )


def started(relay, local_url: str, lines: Lines, **kwargs) -> Listener:
    relay.answer(201, CREATED)
    listening = listener(relay, local_url, lines, **kwargs)
    listening.start(event_types=["order.*"])
    return listening


def test_start_creates_a_session_and_prints_its_secret_once(stub, lines):
    started(stub, "http://localhost:3000/webhooks", lines)
    [create] = stub.sent
    assert (create.method, create.path) == (
        "POST",
        "/api/v1/merchants/acme/listen-sessions",
    )
    assert create.json() == {"event_types": ["order.*"]}
    assert lines == [
        "Listen session ep_1 started for merchant acme (order.*).",
        f"Signing secret: {CREATED['secret']}  (shown once: your handler verifies "
        "the webhooks with it)",
        "Forwarding to http://localhost:3000/webhooks; Ctrl-C stops and ends the "
        "session.",
    ]
    assert KEY not in "\n".join(lines)


def test_a_2xx_is_acked_with_the_exact_body_forwarded(stub, other_stub, lines):
    listening = started(stub, other_stub.url + "/webhooks", lines)
    stub.answer(200, {"items": [message()]})
    stub.answer(200, {"acked": ["dlv_1"], "rejected": []})
    other_stub.answer(200)
    listening.step()

    [forwarded] = other_stub.sent
    assert forwarded.body == BODY.encode("utf-8")
    assert {name: forwarded.headers[name.lower()] for name in HEADERS} == HEADERS
    pull, ack = stub.sent[1:]
    assert (pull.method, pull.path) == ("GET", f"{SESSION}/messages?limit=1")
    assert (ack.method, ack.path, ack.json()) == (
        "POST",
        f"{SESSION}/messages/ack",
        {"ids": ["dlv_1"]},
    )
    assert lines[-1].startswith("2026-12-07 23:40:01  order.created  evt_1  -> 200  ")
    assert (listening.acked, listening.nacked) == (1, 0)


@pytest.mark.parametrize("status", [500, 404, 301])
def test_any_other_status_is_nacked(stub, other_stub, lines, status):
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [message(attempt=2)]})
    stub.answer(200, {"nacked": ["dlv_1"], "rejected": []})
    other_stub.answer(status)
    listening.step()

    nack = stub.sent[-1]
    assert (nack.path, nack.json()) == (f"{SESSION}/messages/nack", {"ids": ["dlv_1"]})
    assert f"evt_1 (attempt 2)  -> {status}  " in lines[-1]
    assert (listening.acked, listening.nacked) == (0, 1)


def test_a_local_url_that_refuses_is_nacked(stub, lines):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections refused
        listening = started(stub, f"http://127.0.0.1:{port}/", lines)
        stub.answer(200, {"items": [message()]})
        stub.answer(200, {"nacked": ["dlv_1"], "rejected": []})
        listening.step()
    assert stub.sent[-1].path == f"{SESSION}/messages/nack"
    assert "  -> connection refused  " in lines[-1]


def test_an_ack_after_the_lease_ran_out_says_it_comes_again(stub, other_stub, lines):
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [message()]})
    stub.answer(200, {"acked": [], "rejected": ["dlv_1"]})
    other_stub.answer(204)
    listening.step()
    assert lines[-1] == (
        "  ack of dlv_1 refused: its lease had run out, so the relay hands it out again"
    )
    assert listening.acked == 0


def test_a_stop_between_pull_and_forward_gives_the_rest_back(stub, other_stub, lines):
    listening = started(stub, other_stub.url, lines, limit=2)
    stub.answer(200, {"items": [message(1), message(2)]})
    stub.answer(200, {"acked": ["dlv_1"], "rejected": []})
    stub.answer(200, {"nacked": ["dlv_2"], "rejected": []})
    other_stub.answer(204)
    listening.out = lambda line: (lines(line), listening.stop())  # stop after one
    listening.step()

    assert len(other_stub.sent) == 1  # the second was never forwarded
    ack, nack = stub.sent[-2:]
    assert (ack.path, ack.json()) == (f"{SESSION}/messages/ack", {"ids": ["dlv_1"]})
    assert (nack.path, nack.json()) == (f"{SESSION}/messages/nack", {"ids": ["dlv_2"]})
    assert (listening.acked, listening.nacked) == (1, 1)


def test_finishing_ends_the_session_and_says_so(stub, lines):
    listening = started(stub, "http://localhost:3000/", lines)
    stub.answer(204)
    listening.stop()
    listening.run()
    end = stub.sent[-1]
    assert (end.method, end.path) == (
        "DELETE",
        "/api/v1/merchants/acme/listen-sessions/ep_1?reason=stopped",
    )
    assert lines[-1] == "Stopped: listen session ep_1 ended; 0 acked, 0 nacked."


def test_empty_pulls_wait_longer_each_time_up_to_a_second(stub, lines):
    listening = started(stub, "http://localhost:3000/", lines)
    for _ in range(4):
        stub.answer(200, {"items": []})
        listening.step()
    assert listening.stopping.waited == [0.25, 0.5, 1.0, 1.0]  # never a busy loop


def test_a_relay_that_cannot_answer_is_waited_for_and_told_once(stub, lines):
    listening = started(stub, "http://localhost:3000/", lines)
    unavailable = problem(502, "Bad Gateway", "The upstream is restarting.")
    stub.answer(502, unavailable).answer(502, unavailable)
    stub.answer(200, {"items": []})
    for _ in range(3):
        listening.step()
    assert listening.stopping.waited == [1.0, 2.0, 0.25]
    assert lines[3:] == [
        "The relay cannot answer (502 Bad Gateway: The upstream is restarting.); "
        "trying again until it does.",
        "The relay answers again.",
    ]


def test_a_session_ended_on_the_relay_stops_with_why(stub, lines):
    listening = started(stub, "http://localhost:3000/", lines)
    stub.answer(410, problem(410, "Gone", "The listen session has ended."))
    stub.answer(
        200,
        {
            **CREATED,
            "state": "ended",
            "ended_reason": "listen session ended in the portal",
        },
    )
    with pytest.raises(ListenError) as raised:
        listening.run()
    assert str(raised.value) == (
        "listen session ep_1 has ended on the relay (listen session ended in the "
        "portal); start another"
    )
    assert [s.method for s in stub.sent] == ["POST", "GET", "GET"]  # no DELETE


def test_a_refused_key_stops_at_once_without_showing_it(stub, lines):
    stub.answer(401, problem(401, "Unauthorized", "Invalid API key."))
    listening = listener(stub, "http://localhost:3000/", lines)
    with pytest.raises(ListenError) as raised:
        listening.start()
    message = str(raised.value)
    assert message == (
        "the relay refused the API key while starting a listen session (401 "
        "Unauthorized: Invalid API key.); check --api-key or WEBHOOK_RELAY_API_KEY"
    )
    assert KEY not in message and len(stub.sent) == 1


def test_the_quota_refusal_is_the_relays_own_words(stub, lines):
    stub.answer(
        422,
        problem(
            422,
            "Unprocessable Entity",
            "acme has 10 endpoints, its quota.",
        ),
    )
    with pytest.raises(ListenError, match="acme has 10 endpoints, its quota"):
        listener(stub, "http://localhost:3000/", lines).start()


def test_attaching_to_a_portal_session_prints_no_secret(stub, lines):
    stub.answer(200, {k: v for k, v in CREATED.items() if k != "secret"})
    listening = listener(stub, "http://localhost:3000/", lines)
    listening.start(session_id="ep_1")
    assert stub.sent[0].path == "/api/v1/merchants/acme/listen-sessions/ep_1"
    assert lines[0] == (
        "Attached to listen session ep_1 of merchant acme (order.*); its signing "
        "secret was shown when it was started."
    )
    assert not any("whsec_" in line for line in lines)


def test_an_ended_session_cannot_be_attached_to(stub, lines):
    stub.answer(200, {**CREATED, "state": "ended"})
    with pytest.raises(ListenError, match="ep_1 has ended; start another"):
        listener(stub, "http://localhost:3000/", lines).start(session_id="ep_1")


def test_the_body_sent_is_the_message_body_byte_for_byte(stub, other_stub, lines):
    # Non-ASCII and escapes as the relay serialised them: re-encoding would
    # change bytes the signature covers.
    body = json.dumps({"type": "t", "data": {"s": "Zoë ☃ \u2028"}}, ensure_ascii=False)
    listening = started(stub, other_stub.url, lines)
    stub.answer(200, {"items": [{**message(), "body": body}]})
    stub.answer(200, {"acked": ["dlv_1"], "rejected": []})
    other_stub.answer(200)
    listening.step()
    assert other_stub.sent[0].body == body.encode("utf-8")


@pytest.mark.parametrize(
    ("signing", "starts"),
    [
        ("v1", ["Signing secret: whsec_"]),
        ("both", ["Signing secret: whsec_", "Public key: whpk_k"]),
        ("v1a", ["Public key: whpk_k"]),
    ],
)
def test_what_verifies_is_printed_by_the_sessions_scheme(stub, lines, signing, starts):
    stub.answer(201, {**CREATED, "signing": signing, "public_key": "whpk_k"})
    listener(stub, "http://localhost:3000/", lines).start()
    printed = lines[1:-1]
    assert [line[: len(start)] for line, start in zip(printed, starts)] == starts
    assert len(printed) == len(starts)


def test_a_relay_that_is_not_up_yet_is_waited_for_until_stopped(lines):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections refused
        client = Client(f"http://127.0.0.1:{port}", KEY, sleep=Sleeps())
        waits = Waits()
        listening = Listener(
            client,
            merchant="acme",
            forward_to="http://localhost:3000/",
            stopping=waits,
            out=lambda line: (lines(line), listening.stop()),
        )
        listening.start()
        listening.run()
    assert lines[0].startswith("The relay cannot answer (POST http://127.0.0.1:")
    assert "no answer" in lines[0]
    assert lines[1:] == ["Stopped before a listen session started."]
    assert waits.waited == [1.0]
