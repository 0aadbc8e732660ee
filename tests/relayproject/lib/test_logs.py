"""Log lines: the JSON shape, the ids in play, and the human-readable default."""

from __future__ import annotations

import io
import json
import logging

import pytest

from relayproject.lib import logs, tracing


@pytest.fixture
def capture():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logs.IdsFilter())
    logger = logging.getLogger("deliveries.test_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

    def use(formatter: logging.Formatter):
        handler.setFormatter(formatter)
        return logger, stream

    yield use
    logger.removeHandler(handler)


def test_a_json_line_carries_the_ids_bound_and_passed_and_the_trace(capture, spans):
    logger, stream = capture(logs.JsonFormatter())
    with (
        logs.log_context(worker="host:1:ab"),
        tracing.tracer.start_as_current_span("relay.send") as span,
    ):
        logger.info(
            "attempt done", extra={"delivery_id": "dlv_1", "endpoint_id": "ep_1"}
        )

    line = json.loads(stream.getvalue())
    assert line["message"] == "attempt done"
    assert line["level"] == "INFO"
    assert line["logger"] == "deliveries.test_logs"
    assert line["timestamp"].endswith("Z")
    assert line["worker"] == "host:1:ab"
    assert (line["delivery_id"], line["endpoint_id"]) == ("dlv_1", "ep_1")
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert line["span_id"] == format(span.get_span_context().span_id, "016x")


def test_ids_bound_in_a_block_leave_with_it(capture):
    logger, stream = capture(logs.JsonFormatter())
    with logs.log_context(event_id="evt_1"):
        logger.info("inside")
    logger.info("outside")

    inside, outside = (json.loads(x) for x in stream.getvalue().splitlines())
    assert inside["event_id"] == "evt_1"
    assert "event_id" not in outside


def test_the_plain_line_appends_ids_it_does_not_already_say(capture):
    logger, stream = capture(logs.PlainFormatter())
    with logs.log_context(worker="w9"):
        logger.info("attempt delivery=dlv_1 ok", extra={"delivery_id": "dlv_1"})

    line = stream.getvalue().strip()
    assert line.endswith("attempt delivery=dlv_1 ok [worker=w9]")


@pytest.mark.parametrize(("fmt", "formatter"), [("json", "json"), ("plain", "plain")])
def test_log_format_picks_the_formatter(fmt, formatter):
    config = logs.logging_config(log_format=fmt, level="INFO")
    assert config["handlers"]["console"]["formatter"] == formatter
    assert config["root"]["handlers"] == ["console"]


def test_ids_bound_for_the_process_reach_lines_of_every_thread(capture):
    import threading

    logger, stream = capture(logs.JsonFormatter())
    logs.log_process_bind(worker="host:7:cd")
    try:
        thread = threading.Thread(target=lambda: logger.info("from the send loop"))
        thread.start()
        thread.join()
    finally:
        logs._process_ids.clear()
    logger.info("after")

    during, after = (json.loads(x) for x in stream.getvalue().splitlines())
    assert during["worker"] == "host:7:cd"
    assert "worker" not in after
