"""Write the published benchmark: report.md and its SVG plots, from one results JSON.

bench/headline.py (`make bench`) gathers the results and calls report_write;
the JSON it keeps beside the report (results.json) renders it again:

    .venv/bin/python -m bench.report bench/report/results.json

The JSON holds "run" (command, times, load, whether the machine was busy),
"deliveries" (bench/deliveries_bench.py's own results file, as written) and
"publish" (bench/api_load.py's figures, read from its output).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from bench.charts import bar_chart, line_chart, number

IMAGES = {
    "throughput": "throughput.svg",
    "latency": "latency.svg",
    "cpu": "cpu.svg",
    "publish": "publish.svg",
}
RECEIVERS = {
    "instant": "instant, 2 endpoints",
    "instant20": "instant, 20 endpoints",
    "mix": "realistic mix, 20 endpoints",
    "100ms": "100 ms, 20 endpoints",
    "5s": "5 s, 20 endpoints",
}
STEADY_AT = re.compile(r" at ([\d.]+ (?:events|deliveries)/s)")


def receiver_of(name: str) -> str:
    """The receiver a deliveries_bench row ran against: its name's first word."""
    words = name.split()
    return words[1] if words[0] == "steady" else words[0]


def dispatchers_of(name: str) -> int:
    found = re.search(r"\bk=(\d+)", name)
    return int(found.group(1)) if found else 1


def cpu_ms_a_delivery(row: dict) -> float | None:
    if row.get("cpu_s") is None or not row["received"]:
        return None
    return 1000 * row["cpu_s"] / row["received"]


def throughput_rows(deliveries: dict) -> list[dict]:
    """The backlog rows, each with its receiver's ceiling from the same run."""
    ceilings = {
        receiver_of(r["name"]): r["rate"]
        for r in deliveries["results"]
        if r["kind"] == "ceiling"
    }
    rows = []
    for r in deliveries["results"]:
        if r["kind"] != "relay" or r["name"].startswith("steady"):
            continue
        receiver, k = receiver_of(r["name"]), dispatchers_of(r["name"])
        plural = "dispatcher" if k == 1 else "dispatchers"
        ceiling = ceilings.get(receiver)
        rows.append(
            {
                **r,
                "label": f"{RECEIVERS.get(receiver, receiver)}, {k} {plural}",
                "ceiling": ceiling,
                "ratio": r["rate"] / ceiling if ceiling else None,
                "cpu_ms": cpu_ms_a_delivery(r),
            }
        )
    return rows


def steady_rows(deliveries: dict) -> list[dict]:
    rows = []
    for r in deliveries["results"]:
        if r["kind"] == "relay" and r["name"].startswith("steady"):
            at = STEADY_AT.search(r["name"])
            label = at.group(1) if at else r["name"]
            rows.append({**r, "label": label, "cpu_ms": cpu_ms_a_delivery(r)})
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else number(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table: figures aligned right, names and notes left."""
    align = ["---" if h in TEXT_COLUMNS else "---:" for h in header]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += [
        "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows
    ]
    return lines


def _about(results: dict) -> list[str]:
    run, deliveries = results["run"], results["deliveries"]
    machine = deliveries["machine"]
    most = max(r["deliveries"] for r in deliveries["results"] if r["kind"] == "relay")
    seconds = results.get("publish", {}).get("seconds", 0)
    start = float(run["load_before"].split()[0])
    peak = max(
        float(load.split()[0])
        for load in [run["load_after"]] + [r["load"] for r in deliveries["results"]]
    )
    reached = f"; it reached {peak:.2f} during the run" if peak > start else ""
    lines = []
    if run.get("busy"):
        lines += [
            f"> **Ran on a busy machine: load {run['load_before'].split()[0]}** "
            f"(the 1-minute load average when the run started, after waiting "
            f"{run['waited_s']:.0f} s for it to fall under {run['threshold']:g}"
            f"{reached}). "
            "Other work shared the CPU during the run: compare figures within "
            "this run only.",
            "",
        ]
    if run.get("quick"):
        lines += [
            f"> **Quick run** (`make bench-quick`): smoke sizes, at most "
            f"{most:,} deliveries a scenario and {seconds:g} s a publish phase. "
            "It shows the benchmark works; `make bench` makes the figures to "
            "quote.",
            "",
        ]
    lines += [
        f"- **When:** {run['started']} to {run['finished']} (UTC)",
        f"- **Commit:** `{machine['commit']}`",
        f"- **Machine:** {machine['cpu']}, {machine['nproc']} CPUs, "
        f"{machine['memory']} of memory; {run.get('os', '')}",
        f"- **Versions:** PostgreSQL {machine['postgres']}, Python {machine['python']}",
        f"- **Load average (1, 5, 15 min):** {run['load_before']} before, "
        f"{run['load_after']} after; the benchmark's own processes raise it "
        "during a run, and each scenario's row gives the load when it ended",
        f"- **Command:** `{run['command']}`, which ran:",
        "",
        *(f"      {step}" for step in run["steps"]),
        "",
        "Everything ran on this one machine: PostgreSQL, the receivers, the "
        "dispatchers, gunicorn and the load generator share its cores, over "
        "loopback.",
    ]
    return lines


THROUGHPUT_COLUMNS = (
    "scenario|deliveries|received|deliveries/s|ceiling/s|of the ceiling"
    "|CPU ms a delivery|1-minute load at the end|notes"
).split("|")
LATENCY_COLUMNS = (
    "published at|deliveries|deliveries/s reached|p50 ms|p90 ms|p99 ms"
    "|CPU ms a delivery|1-minute load at the end|notes"
).split("|")
# Columns of names and notes, aligned left; the others hold figures.
TEXT_COLUMNS = {"scenario", "published at", "request", "notes"}
PUBLISH_COLUMNS = (
    "request|requests/s|events/s|p50 ms|p99 ms|non-2xx"
    "|gunicorn CPU ms a request|PostgreSQL CPU ms a request"
).split("|")


def _throughput(rows: list[dict]) -> list[str]:
    table = _table(
        THROUGHPUT_COLUMNS,
        [
            [r["label"], f"{r['deliveries']:,}", f"{r['received']:,}",
             number(r["rate"]), _ms(r["ceiling"]),
             "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
             _ms(r["cpu_ms"]), r["load"].split()[0], "; ".join(r["notes"])]
            for r in rows
        ],
    )  # fmt: skip
    return [
        "## Delivery throughput beside its ceiling",
        "",
        f"![Deliveries a second beside the ceiling]({IMAGES['throughput']})",
        "",
        "A backlog published first, then dispatchers (`run_dispatcher --drain`, "
        "default settings) deliver it to a loopback receiver that answers 200 "
        "at once, after 100 ms, or after the realistic mix (60% 20-80 ms, 30% "
        "150-400 ms, 8% 1-2 s, 2% 5 s). Deliveries a second run from the first "
        "receipt to the last. The ceiling is the same receiver fed plain "
        "aiohttp POSTs, 512 in flight, with no database and no signing "
        "(`bench/ceiling.py`), measured in the same run.",
        "",
        *table,
    ]


def _latency(rows: list[dict]) -> list[str]:
    table = _table(
        LATENCY_COLUMNS,
        [
            [r["label"], f"{r['deliveries']:,}", number(r["rate"]),
             _ms(r["p50_ms"]), _ms(r.get("p90_ms")), _ms(r["p99_ms"]),
             _ms(r["cpu_ms"]), r["load"].split()[0], "; ".join(r["notes"])]
            for r in rows
        ],
    )  # fmt: skip
    return [
        "## Publish-to-receipt latency at steady rates",
        "",
        f"![Latency percentiles at each rate]({IMAGES['latency']})",
        "",
        "One dispatcher waits on LISTEN; events are published one a transaction "
        "at a steady rate, to 2 endpoints of an instant receiver. Latency runs "
        "from the event's `created_at` to its receipt.",
        "",
        *table,
    ]


def _cpu() -> list[str]:
    return [
        "## CPU per delivery",
        "",
        f"![Dispatcher CPU per delivery]({IMAGES['cpu']})",
        "",
        "User and system CPU of all the dispatcher processes of a scenario "
        "(start-up included) over the deliveries received: the relay's own "
        "cost; PostgreSQL's and the receiver's CPU are not in it.",
    ]


def _cpu_cell(spent: dict | None, part: str) -> str:
    # PostgreSQL's share is read from every postgres process on the machine:
    # one that ended during the phase took its count away, leaving it negative.
    if spent is None or spent[part] < 0:
        return "-"
    return f"{spent[part]:.3f}"


def _publish(publish: dict) -> list[str]:
    cpu = publish.get("cpu_ms", {})
    table = _table(
        PUBLISH_COLUMNS,
        [
            [f"`{name}`", number(p["requests_s"]),
             "-" if p["events_s"] is None else number(p["events_s"]),
             _ms(p["p50_ms"]), _ms(p["p99_ms"]), str(p["non_2xx"]),
             _cpu_cell(cpu.get(name), "web"), _cpu_cell(cpu.get(name), "database")]
            for name, p in publish["phases"].items()
        ],
    )  # fmt: skip
    inproc = [
        f"- `{name}`: p50 {number(v['p50_ms'])} ms, p99 {number(v['p99_ms'])} ms"
        for name, v in publish.get("in_process", {}).items()
        if name.endswith(": call")
    ]
    return [
        "## Publish through the API",
        "",
        f"![Requests and events a second]({IMAGES['publish']})",
        "",
        f"gunicorn with {publish['workers']} sync workers, "
        f"{publish['connections']} connections from {publish['load_generator']}, "
        f"{publish['seconds']:g} s a phase (`bench/api_load.py`). The merchant "
        "has 2 endpoints, so each event writes 2 deliveries; a batch carries "
        "100 events. `GET /healthz` (one query a request) is the ceiling a "
        "request is measured against. PostgreSQL's CPU is that of every "
        "postgres process on the machine, so other work on it counts too; "
        "`-` marks a phase where processes that ended took their count away.",
        "",
        *table,
        "",
        "In the bench process, inside `transaction.atomic()`:",
        "",
        *inproc,
    ]


def _reproduce() -> list[str]:
    return [
        "## Reproduce",
        "",
        "On a quiet machine with PostgreSQL on 127.0.0.1:5432 (user `postgres`) "
        "and `wrk` installed (without it, Python threads make the API's load "
        "and take CPU from the server): `make bench`. It waits for a 1-minute load under "
        "1 (and says so in the report when it gave up waiting), measures the "
        "committed HEAD (a clean export, so work in progress is not measured), "
        "and rewrites this folder. `make bench-quick` is the smoke run. "
        "Earlier runs and how the figures were reached: `bench/RESULTS.md`.",
    ]


def charts(results: dict) -> dict[str, str]:
    """Each plot's file name and its SVG text."""
    deliveries = results["deliveries"]
    backlog, steady = throughput_rows(deliveries), steady_rows(deliveries)
    labels = [r["label"] for r in backlog]
    svgs = {
        IMAGES["throughput"]: bar_chart(
            title="Delivery throughput beside its ceiling",
            unit="deliveries/s",
            categories=labels,
            series=[
                ("relay", [r["rate"] for r in backlog]),
                ("ceiling (aiohttp, no database)", [r["ceiling"] for r in backlog]),
            ],
        ),
        IMAGES["cpu"]: bar_chart(
            title="Dispatcher CPU per delivery",
            unit="CPU ms a delivery",
            categories=labels + [f"steady, {r['label']}" for r in steady],
            series=[("CPU ms", [r["cpu_ms"] for r in backlog + steady])],
        ),
    }
    if steady:
        svgs[IMAGES["latency"]] = line_chart(
            title="Publish-to-receipt latency at steady rates",
            unit="ms",
            categories=[r["label"] for r in steady],
            series=[
                (p, [r.get(f"{p}_ms") for r in steady]) for p in ("p50", "p90", "p99")
            ],
        )
    publish = results.get("publish")
    if publish:
        phases = publish["phases"]
        svgs[IMAGES["publish"]] = bar_chart(
            title="Publish through the API",
            unit="a second",
            categories=[f"{n} (ceiling)" if "healthz" in n else n for n in phases],
            series=[
                ("requests/s", [p["requests_s"] for p in phases.values()]),
                ("events/s", [p["events_s"] for p in phases.values()]),
            ],
        )
    return svgs


def markdown(results: dict) -> str:
    deliveries = results["deliveries"]
    steady = steady_rows(deliveries)
    sections = [
        ["# Benchmark", "", *_about(results)],
        _throughput(throughput_rows(deliveries)),
        _latency(steady) if steady else [],
        _cpu(),
        _publish(results["publish"]) if results.get("publish") else [],
        _reproduce(),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"


def report_write(results: dict, *, out: Path) -> list[Path]:
    """Write report.md and its SVGs into `out`; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, svg in charts(results).items():
        (out / name).write_text(svg)
        written.append(out / name)
    (out / "report.md").write_text(markdown(results))
    return [out / "report.md", *written]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results.json of bench.headline")
    parser.add_argument("--out", type=Path, help="folder (default: the JSON's own)")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    for path in report_write(results, out=args.out or args.results.parent):
        print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
