"""bench/headline.py's own logic: the wait for a quiet machine, and reading
bench/api_load.py's printed figures (lines as it printed them on this VM)."""

from __future__ import annotations

import pytest

from bench.headline import api_load_parse, ms_of, wait_for_quiet

API_LOAD_OUTPUT = """\
before: 14:27:40 up 56 min,  0 user,  load average: 2.68, 1.90, 2.62
gunicorn 2 sync workers, 8 connections, 3 s a phase, wrk=yes
GET /healthz                           533.5 req/s       534 events/s p50  12.75ms p99  72.60ms non-2xx 0
POST /events                           152.1 req/s       152 events/s p50 850.00us p99    1.02s non-2xx 0
POST /events (Idempotency-Key)          78.0 req/s        78 events/s p50 100.63ms p99 195.11ms non-2xx 3
POST /events/batch (100)                28.1 req/s      2812 events/s p50 279.59ms p99 363.87ms non-2xx 0
CPU ms a request (gunicorn workers / PostgreSQL; py-spy adds to the first):
  GET /healthz                         2.043 /  -0.993
  POST /events                         4.842 /   2.323
  POST /events (Idempotency-Key)       7.481 /   6.326
  POST /events/batch (100)            15.766 /  -0.474
in-process event_publish: call p50/p99 ms: 3.37 / 9.73
in-process events_publish of 100: call p50/p99 ms: 32.77 / 50.64

single / healthz = 0.29 (target >= 0.5); batch events/s = 2812 (target >= 15000)
after:  14:28:03 up 56 min,  0 user,  load average: 2.73, 1.97, 2.62
"""


class Machine:
    """A load average that moves as scripted, and a clock that sleeping moves."""

    def __init__(self, loads: list[float]) -> None:
        self.loads = iter(loads)
        self.now = 0.0
        self.slept: list[float] = []

    def read_load(self) -> float:
        return next(self.loads)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def wait(machine: Machine, *, limit_s: float):
    return wait_for_quiet(
        limit_s=limit_s,
        poll_s=15,
        read_load=machine.read_load,
        sleep=machine.sleep,
        clock=machine.clock,
    )


def test_a_quiet_machine_starts_at_once():
    machine = Machine([0.4])
    quiet = wait(machine, limit_s=600)
    assert (quiet.load, quiet.waited_s, quiet.busy) == (0.4, 0.0, False)
    assert machine.slept == []


def test_it_waits_until_the_load_falls_under_one():
    machine = Machine([2.5, 1.4, 1.0, 0.7])
    quiet = wait(machine, limit_s=600)
    assert (quiet.load, quiet.waited_s, quiet.busy) == (0.7, 45.0, False)


def test_it_gives_up_at_its_bound_and_says_the_machine_was_busy():
    machine = Machine([2.0] * 100)
    quiet = wait(machine, limit_s=40)
    assert (quiet.load, quiet.waited_s, quiet.busy) == (2.0, 40.0, True)
    assert machine.slept == [15, 15, 10]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("850.00us", 0.85),
        ("12.75ms", 12.75),
        ("1.02s", 1020.0),
        ("2.00m", 120_000.0),
        ("", None),
        (None, None),
    ],
)
def test_durations_are_read_in_milliseconds(text, ms):
    assert ms_of(text) == (pytest.approx(ms) if ms is not None else None)


def test_the_api_load_figures_are_read_per_phase():
    publish = api_load_parse(API_LOAD_OUTPUT)
    assert (publish["workers"], publish["connections"], publish["seconds"]) == (2, 8, 3)
    assert publish["load_generator"] == "wrk"
    assert list(publish["phases"]) == [
        "GET /healthz",
        "POST /events",
        "POST /events (Idempotency-Key)",
        "POST /events/batch (100)",
    ]
    healthz, single = (
        publish["phases"]["GET /healthz"],
        publish["phases"]["POST /events"],
    )
    assert healthz["requests_s"] == 533.5 and healthz["events_s"] is None
    assert single["p50_ms"] == pytest.approx(0.85)
    assert single["p99_ms"] == pytest.approx(1020.0)
    batch = publish["phases"]["POST /events/batch (100)"]
    assert (batch["requests_s"], batch["events_s"]) == (28.1, 2812.0)
    assert publish["phases"]["POST /events (Idempotency-Key)"]["non_2xx"] == 3
    assert publish["cpu_ms"]["GET /healthz"] == {"web": 2.043, "database": -0.993}
    assert len(publish["cpu_ms"]) == 4
    assert publish["in_process"]["events_publish of 100: call"] == {
        "p50_ms": 32.77,
        "p99_ms": 50.64,
    }


def test_output_without_figures_stops_the_run():
    with pytest.raises(SystemExit, match="printed no phase figures"):
        api_load_parse("gunicorn did not come up\n")
