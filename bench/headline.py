"""The published benchmark (`make bench`): headline scenarios, their ceilings, a report.

Waits for a quiet machine (1-minute load under 1; past --max-wait it runs
anyway and the report says the machine was busy), exports the commit to
measure once, then runs, on that same commit:

- bench/deliveries_bench.py: the instant, realistic-mix and 100 ms receivers
  with one and two dispatchers, each receiver's aiohttp ceiling, and
  publish-to-receipt latency at steady rates;
- bench/api_load.py (the export's own copy, so gunicorn serves that commit):
  `GET /healthz` as the ceiling, single, idempotent and batch publishes.

Then writes bench/report/ (report.md, SVG plots, results.json) with
bench/report.py.

    .venv/bin/python -m bench.headline            # make bench
    .venv/bin/python -m bench.headline --quick    # make bench-quick: smoke sizes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.deliveries_bench import tree_export
from bench.report import report_write

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHON = sys.executable
REPORT = HERE / "report"
QUIET_LOAD = 1.0  # the 1-minute load average under which a run counts as quiet
POLL_SECONDS = 15.0  # how often the load is read while waiting
MAX_WAIT = {False: 900.0, True: 60.0}  # seconds to wait, by --quick
# deliveries_bench's scenarios (by name, a substring each) and steady rates.
SCENARIOS = "instant20 default,mix default,100ms default,steady"
STEADY_RATES = "50,200,500"
API_SECONDS = {False: 10, True: 3}  # a publish phase, by --quick
API_IN_PROCESS = {False: 2000, True: 200}

PHASE = re.compile(
    r"(?P<name>\S.*?)\s+(?P<rps>[\d.]+) req/s\s+(?P<eps>\d+) events/s "
    r"p50\s+(?P<p50>\S+) p99\s+(?P<p99>\S+) non-2xx (?P<bad>\d+)"
)
CPU_LINE = re.compile(r"\s+(?P<name>\S.*?)\s+(?P<web>-?[\d.]+) /\s+(?P<db>-?[\d.]+)")
SETUP = re.compile(
    r"gunicorn (?P<workers>\d+) sync workers, (?P<connections>\d+) connections, "
    r"(?P<seconds>\d+) s a phase, wrk=(?P<wrk>yes|no)"
)
IN_PROCESS = re.compile(
    r"in-process (?P<name>.+?) p50/p99 ms: (?P<p50>[\d.]+) / (?P<p99>[\d.]+)"
)
DURATION = re.compile(r"(?P<value>[\d.]+)(?P<unit>us|ms|s|m)")
TO_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass
class Quiet:
    load: float  # the 1-minute load average when the wait ended
    waited_s: float
    busy: bool  # still at or over the threshold when the wait gave up


def load_read() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def load_line() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def wait_for_quiet(
    *,
    limit_s: float,
    threshold: float = QUIET_LOAD,
    poll_s: float = POLL_SECONDS,
    read_load: Callable[[], float] = load_read,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Quiet:
    """Wait until the 1-minute load is under threshold, at most limit_s seconds."""
    started = clock()
    load = read_load()
    while load >= threshold and clock() - started < limit_s:
        print(
            f"load {load:.2f}: waiting for it to fall under {threshold:g}", flush=True
        )
        sleep(min(poll_s, max(0.0, limit_s - (clock() - started))))
        load = read_load()
    return Quiet(load=load, waited_s=clock() - started, busy=load >= threshold)


def ms_of(text: str | None) -> float | None:
    """wrk's "850.00us", "1.23ms", "1.02s" (or the threads' "1.23ms") in ms."""
    found = DURATION.fullmatch(text or "")
    return float(found["value"]) * TO_MS[found["unit"]] if found else None


def api_load_parse(stdout: str) -> dict:
    """bench/api_load.py's printed figures, as the report's "publish" part."""
    publish: dict = {"phases": {}, "cpu_ms": {}, "in_process": {}}
    in_cpu = False
    for line in stdout.splitlines():
        if found := SETUP.search(line):
            publish["workers"] = int(found["workers"])
            publish["connections"] = int(found["connections"])
            publish["seconds"] = float(found["seconds"])
            wrk = found["wrk"] == "yes"
            publish["load_generator"] = "wrk" if wrk else "Python threads"
        elif found := PHASE.match(line):
            batch = "batch" in found["name"]
            publish["phases"][found["name"]] = {
                "requests_s": float(found["rps"]),
                "events_s": None if "healthz" in found["name"] else float(found["eps"]),
                "p50_ms": ms_of(found["p50"]),
                "p99_ms": ms_of(found["p99"]),
                "non_2xx": int(found["bad"]),
                "events_a_request": 100 if batch else 1,
            }
        elif line.startswith("CPU ms a request"):
            in_cpu = True
        elif in_cpu and (found := CPU_LINE.fullmatch(line)):
            publish["cpu_ms"][found["name"]] = {
                "web": float(found["web"]),
                "database": float(found["db"]),
            }
        elif found := IN_PROCESS.match(line):
            in_cpu = False
            publish["in_process"][found["name"]] = {
                "p50_ms": float(found["p50"]),
                "p99_ms": float(found["p99"]),
            }
    if not publish["phases"]:
        raise SystemExit("bench/api_load.py printed no phase figures")
    return publish


def run_step(cmd: list[str], *, cwd: Path) -> str:
    """Run one benchmark script, echoing its output; return the output."""
    print(f"$ {shlex.join(cmd)}", flush=True)
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    if proc.wait() != 0:
        raise SystemExit(f"{cmd[1]} exited {proc.returncode}")
    return "".join(lines)


def shown(cmd: list[str]) -> str:
    """A command as the report shows it: paths inside the tree made relative."""
    return shlex.join(
        [str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else a for a in cmd]
    )


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes")
    parser.add_argument("--max-wait", type=float, help="seconds to wait for quiet")
    parser.add_argument("--rev", default="HEAD", help="the commit to measure")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    limit = MAX_WAIT[args.quick] if args.max_wait is None else args.max_wait

    quiet = wait_for_quiet(limit_s=limit)
    started, load_before = now_utc(), load_line()
    tree, sha = tree_export(args.rev)
    deliveries_cmd = [
        PYTHON,
        str(HERE / "deliveries_bench.py"),
        "--rev",
        sha,
        "--only",
        SCENARIOS,
        "--steady-rates",
        STEADY_RATES,
        *(["--quick"] if args.quick else []),
    ]
    output = run_step(deliveries_cmd, cwd=ROOT)
    written = re.search(r"^written (\S+\.json)", output, re.M)
    if written is None:
        raise SystemExit("bench/deliveries_bench.py wrote no results file")
    deliveries = json.loads(Path(written.group(1)).read_text())
    api_cmd = [
        PYTHON,
        "bench/api_load.py",
        "--seconds",
        str(API_SECONDS[args.quick]),
        "--in-process",
        str(API_IN_PROCESS[args.quick]),
    ]
    publish = api_load_parse(run_step(api_cmd, cwd=tree))

    target = "bench-quick" if args.quick else "bench"
    own = [PYTHON, "-m", "bench.headline", *(argv or sys.argv[1:])]
    results = {
        "run": {
            "command": f"make {target}" if os.environ.get("MAKELEVEL") else shown(own),
            "steps": [
                shown(deliveries_cmd),
                f"cd {shown([str(tree)])} && "
                + shlex.join([os.path.relpath(PYTHON, tree), *api_cmd[1:]]),
            ],
            "quick": args.quick,
            "started": started,
            "finished": now_utc(),
            "threshold": QUIET_LOAD,
            "waited_s": quiet.waited_s,
            "busy": quiet.busy,
            "load_before": load_before,
            "load_after": load_line(),
            "os": platform.platform(),
        },
        "deliveries": deliveries,
        "publish": publish,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    for path in report_write(results, out=args.out):
        print(
            f"written {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
