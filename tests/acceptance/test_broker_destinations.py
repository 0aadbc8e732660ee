"""Broker destinations with real dispatcher processes and the real brokers on
loopback (issue 41): a broker that refuses is retried, then dead-lettered,
and the replay reaches the consumer once the broker is fixed; an ordered
endpoint keeps each key's order through the broker's refusals; no
credential reaches a log line or an attempt row.

Each test runs once per kind, against the target of tests/support/brokers.py
that starts broken in that kind's way.
"""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.replay import delivery_replay
from deliveries.services import EventInput, events_publish
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.brokers import (
    BROKER_ENV,
    TARGETS,
    JetStreamNoStream,
    MqttCut,
    RabbitUnbound,
    RedisWrongType,
    broker_endpoint,
    verified,
)
from tests.support.processes import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

# Retries due within half a second, and a breaker that stays out of the way
# (its pauses are tested on their own).
QUICK = {
    **BROKER_ENV,
    "RETRY_BASE_SECONDS": "0.1",
    "RETRY_MAX_DELAY_SECONDS": "0.5",
    "BREAKER_FAILURE_THRESHOLD": "1000",
    "HTTP_TIMEOUT_SECONDS": "5",
}
WAIT = 30  # seconds: the most any step below may take on a loaded machine


@pytest.fixture(params=sorted(TARGETS))
def broken(request):
    target = TARGETS[request.param]()
    yield target
    target.close()


def lower(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def stop(process) -> None:
    process.signal(signal.SIGTERM)
    assert process.wait(WAIT) == 0, process.stderr[-3000:]


def test_a_refusing_broker_is_retried_then_dead_and_the_replay_arrives_once_fixed(
    broken, dispatchers
):
    merchant = factories.merchant()
    endpoint = broker_endpoint(
        merchant,
        kind=broken.kind,
        url=broken.url,
        target=broken.target,
        max_attempts=3,
    )
    [event] = events_publish(
        merchant=merchant, events=[EventInput("order.paid", {"n": 1})]
    )
    delivery = Delivery.objects.get(event_id=event.pk)
    dispatcher = dispatchers.start("--worker-id=broker", env=QUICK)

    wait_until(
        lambda: Delivery.objects.filter(pk=delivery.pk, status="dead").exists(),
        timeout=WAIT,
        what="the delivery to die after its retries",
    )
    failed = list(Attempt.objects.filter(delivery_id=delivery.pk).order_by("number"))
    assert [(a.error_kind, a.outcome, a.status_code) for a in failed] == [
        (broken.failure, "retry", None),
        (broken.failure, "retry", None),
        (broken.failure, "dead", None),
    ], [a.error_message for a in failed]
    assert all(a.error_message for a in failed)
    assert broken.messages() == []

    broken.fix()
    delivery_replay(delivery_id=delivery.pk, now=utcnow())
    wait_until(
        lambda: Delivery.objects.filter(pk=delivery.pk, status="succeeded").exists(),
        timeout=WAIT,
        what="the replay to be acknowledged",
    )
    stop(dispatcher)

    [message] = broken.messages(at_least=1)
    event_sent = verified(endpoint, message)
    assert event_sent["id"] == str(event.pk)
    assert event_sent["data"] == {"n": 1}
    headers = lower(message.headers)
    assert headers["webhook-id"] == str(event.pk)
    assert headers["x-relay-delivery-id"] == str(delivery.pk)
    assert headers["x-relay-attempt"] == "4"
    succeeded = Attempt.objects.get(delivery_id=delivery.pk, number=4)
    assert (succeeded.outcome, succeeded.status_code, succeeded.error_kind) == (
        "succeeded",
        None,
        "",
    )
    assert succeeded.response_body, "the attempt keeps what the broker answered"


def test_an_ordered_broker_endpoint_keeps_each_keys_order_across_retries(
    broken, dispatchers
):
    keys, events = 3, 30
    merchant = factories.merchant()
    endpoint = broker_endpoint(
        merchant,
        kind=broken.kind,
        url=broken.url,
        target=broken.target,
        ordered=True,
        max_attempts=100,  # the lanes wait for the fix, never die
    )
    events_publish(
        merchant=merchant,
        events=[
            EventInput("order.paid", {"n": n}, ordering_key=f"k{n % keys}")
            for n in range(events)
        ],
    )
    for n in range(2):
        dispatchers.start("--concurrency=8", f"--worker-id=ordered-{n}", env=QUICK)
    failures = Attempt.objects.filter(endpoint=endpoint).exclude(error_kind="")
    wait_until(
        lambda: failures.count() >= 2 * keys,
        timeout=WAIT,
        what="the lanes' heads to fail a few times",
    )
    broken.fix()
    wait_until(
        lambda: (
            Delivery.objects.filter(endpoint=endpoint, status="succeeded").count()
            == events
        ),
        timeout=WAIT,
        what="every event to be acknowledged",
    )

    # Only each lane's head was tried while the broker refused.
    failed_events = set(
        Delivery.objects.filter(
            pk__in=failures.values_list("delivery_id", flat=True)
        ).values_list("event__data__n", flat=True)
    )
    assert failed_events <= set(range(keys)), failed_events
    assert set(failures.values_list("error_kind", flat=True)) == {broken.failure}
    received: dict[str, list[int]] = {f"k{k}": [] for k in range(keys)}
    for message in broken.messages(at_least=events):
        n = verified(endpoint, message)["data"]["n"]
        received[f"k{n % keys}"].append(n)
    for k in range(keys):
        assert received[f"k{k}"] == list(range(k, events, keys)), received


# Wrong credentials, where the broker checks them (RabbitMQ, Redis); NATS and
# Mosquitto here take anyone, so their sends succeed with the password on the
# wire.
CREDENTIAL_CASES = {
    RabbitUnbound: ErrorKind.BROKER_AUTH,
    RedisWrongType: ErrorKind.BROKER_AUTH,
    JetStreamNoStream: "",
    MqttCut: "",
}


def test_broker_credentials_never_reach_a_log_line_or_an_attempt_row(dispatchers):
    password = f"pw-{uuid.uuid4().hex}"
    merchant = factories.merchant()
    targets = [make() for make in CREDENTIAL_CASES]
    try:
        for target in targets:
            target.fix()
            scheme, rest = target.url.split("://", 1)
            rest = rest.split("@", 1)[-1]  # RabbitMQ's consumer URL has its own
            broker_endpoint(
                merchant,
                kind=target.kind,
                url=f"{scheme}://relay-user:{password}@{rest}",
                target=target.target,
                max_attempts=2,
            )
        events_publish(merchant=merchant, events=[EventInput("order.paid", {})])
        dispatcher = dispatchers.start(
            "--worker-id=creds", env={**QUICK, "LOG_LEVEL": "DEBUG"}
        )
        wait_until(
            lambda: (
                not Delivery.objects.exclude(status__in=["succeeded", "dead"]).exists()
            ),
            timeout=WAIT,
            what="every delivery to end",
        )
        stop(dispatcher)
    finally:
        for target in targets:
            target.close()

    ends = {
        kind: set(
            Attempt.objects.filter(endpoint__kind=kind).values_list(
                "error_kind", flat=True
            )
        )
        for kind in (target.kind for target in targets)
    }
    assert ends == {t.kind: {CREDENTIAL_CASES[type(t)]} for t in targets}, list(
        Attempt.objects.values_list("endpoint__kind", "error_message")
    )
    logs = dispatcher.stdout + dispatcher.stderr
    assert logs, "the dispatcher logged nothing: the search below proves nothing"
    assert password not in logs
    for attempt in Attempt.objects.all():
        written = [
            attempt.error_message,
            attempt.response_body,
            attempt.request_url or "",
            json.dumps(attempt.request_headers),
        ]
        assert not any(password in text for text in written), (
            f"attempt {attempt.pk} keeps the password"
        )
