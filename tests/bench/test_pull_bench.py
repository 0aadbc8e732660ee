"""bench/pull_bench.py --quick, as CI runs it: a real gunicorn, a real
dispatcher and real consumer processes drain a small backlog from a pull
endpoint, one consumer and then four, on a database of the run's own.

No figure is asserted (speed lives in bench/RESULTS.md): the run must end
with every message acked exactly once, none handed to two consumers, every
signature verified, and a report that says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.support.processes import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

EVENTS = 200
RUN_SECONDS = 180  # a fresh database's migrations are most of it


@pytest.fixture
def bench_database():
    """A database of its own (the bench empties its tables), dropped after."""
    server = os.environ["TEST_DATABASE_URL"].rsplit("/", 1)[0]
    name = f"bench_pull_ci_{uuid.uuid4().hex[:10]}"
    yield f"{server}/{name}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_quick_run_drains_the_backlog_once_with_one_and_four_consumers(
    bench_database, tmp_path
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEST_DATABASE")}
    run = subprocess.run(
        [sys.executable, "-m", "bench.pull_bench", "--quick"]
        + ["--events", str(EVENTS), "--tree", str(ROOT)]
        + ["--database-url", bench_database, "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )

    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    (written,) = tmp_path.glob("pull-*.json")
    results = json.loads(written.read_text())["results"]
    assert [(r["workers"], r["consumers"]) for r in results] == [(2, 1), (2, 4)]
    for result in results:
        assert result["acked"] == EVENTS, result
        assert result["duplicates"] == 0, result
        assert result["notes"] == [], result
        assert result["rate"] > 0 and result["pull_p50_ms"] is not None, result
    assert "| pull w=2 c=4 | 2 | 4 | 200 | 200 | 0 |" in run.stdout
