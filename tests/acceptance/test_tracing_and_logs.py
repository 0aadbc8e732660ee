"""A real dispatcher process: its spans reach a collector, its JSON logs hold ids only."""

from __future__ import annotations

import json

import pytest

from deliveries.models import Event
from endpoints.models import Endpoint
from tests.support import factories
from tests.support.api import api_as
from tests.support.otlp_sink import OtlpSink

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.acceptance,
    pytest.mark.django_db(transaction=True),
]

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"
MARKER = "payload-marker-2b9e41"


def _publish_three(receiver_url: str) -> tuple[list[str], Endpoint, str]:
    """Three events to one endpoint made over the API; ids, endpoint, its secret."""
    factories.merchant("acme")
    api = api_as(None)
    made = api.post("/merchants/acme/endpoints", {"url": receiver_url}).json()
    endpoint = Endpoint.objects.get(pk=made["id"])
    ids = []
    for n in range(3):
        response = api.post(
            "/events",
            {"merchant": "acme", "type": "order.paid", "data": {"n": n, "m": MARKER}},
            headers={"traceparent": CALLER},
        )
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    return ids, endpoint, made["secret"]


def test_a_dispatcher_exports_send_spans_linked_to_the_stored_publish(
    receiver, dispatchers, spans
):
    event_ids, endpoint, _ = _publish_three(receiver.url)
    stored = {
        pk: tuple(tp.split("-")[1:3])
        for pk, tp in Event.objects.values_list("id", "traceparent")
    }
    assert {trace_id for trace_id, _ in stored.values()} == {CALLER_TRACE}

    with OtlpSink() as sink:
        dispatcher = dispatchers.start(
            "--drain",
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
                "OTEL_SERVICE_NAME": "relay-dispatcher-test",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            },
        )
        assert dispatcher.wait(60) == 0, dispatcher.stderr[-3000:]
        sends = sink.wait_for("POST", 3)
        claims = sink.named("relay.claim")
        records = sink.named("relay.record")

    assert len(receiver.received) == 3
    assert len(sends) == 3
    assert claims and records
    for send in sends:
        event_id = send["attributes"]["relay.event_id"]
        assert event_id in event_ids
        assert send["links"] == [stored[event_id]]
        assert send["service"] == "relay-dispatcher-test"
        assert send["kind"] == 3  # SPAN_KIND_CLIENT
        assert send["attributes"]["relay.endpoint_id"] == endpoint.pk
        assert send["attributes"]["http.response.status_code"] == 200
        assert send["attributes"]["relay.outcome"] == "succeeded"
        assert MARKER not in json.dumps(send)
    # No traceparent header by default: internal trace ids stay internal.
    assert all("traceparent" not in r.headers for r in receiver.received)


def test_json_logs_of_a_dispatcher_run_parse_and_hold_ids_but_no_payload_or_secret(
    receiver, dispatchers
):
    _, endpoint, secret = _publish_three(receiver.url)
    # Successes log at DEBUG (their attempt rows say the same); ask for them.
    dispatcher = dispatchers.start(
        "--drain",
        "--worker-id=json-worker",
        env={"LOG_FORMAT": "json", "LOG_LEVEL": "DEBUG"},
    )
    assert dispatcher.wait(60) == 0, dispatcher.stderr[-3000:]

    lines = [
        line
        for line in (dispatcher.stdout + dispatcher.stderr).splitlines()
        if line.strip()
    ]
    records = [json.loads(line) for line in lines]  # every line is JSON
    attempts = [r for r in records if r["message"].startswith("attempt ")]
    assert len(attempts) == 3
    for record in attempts:
        assert {"timestamp", "level", "logger", "message"} <= set(record)
        assert record["level"] == "DEBUG"
        assert record["endpoint_id"] == endpoint.pk
        assert record["merchant_id"] == endpoint.merchant_id
        assert record["worker"] == "json-worker"
        assert record["delivery_id"] and record["event_id"]
    text = "\n".join(lines)
    assert MARKER not in text
    assert secret.removeprefix("whsec_") not in text
