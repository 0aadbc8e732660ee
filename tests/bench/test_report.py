"""bench/report.py writes the published benchmark from a recorded results JSON.

recorded_results.json is what `make bench-quick` gathered on a busy 2-core
VM (bench/headline.py): the writer is fed it, and what it writes is read back
as Markdown and as XML. No benchmark runs here.
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.charts import number
from bench.report import report_write, steady_rows, throughput_rows

RECORDED = Path(__file__).with_name("recorded_results.json")
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def results() -> dict:
    return json.loads(RECORDED.read_text())


def written(results: dict, out: Path) -> tuple[str, dict[str, ET.Element]]:
    """The report's Markdown and each SVG parsed (a parse error fails the test)."""
    paths = report_write(results, out=out)
    svgs = {p.name: ET.parse(p).getroot() for p in paths if p.suffix == ".svg"}
    return (out / "report.md").read_text(), svgs


def texts(svg: ET.Element) -> list[str]:
    """Each <text> of the plot, its lines (<tspan>s) joined by spaces."""
    return [
        " ".join(piece.strip() for piece in t.itertext() if piece.strip())
        for t in svg.iter(f"{SVG}text")
    ]


def test_it_writes_the_report_and_four_well_formed_svg_plots(results, tmp_path):
    markdown, svgs = written(results, tmp_path)
    assert sorted(svgs) == ["cpu.svg", "latency.svg", "publish.svg", "throughput.svg"]
    assert all(svg.tag == f"{SVG}svg" for svg in svgs.values())
    # Every image the Markdown shows is a file written beside it.
    shown = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert sorted(shown) == sorted(svgs)


def test_the_report_names_the_machine_the_commit_the_load_and_the_command(
    results, tmp_path
):
    markdown, _ = written(results, tmp_path)
    machine, run = results["deliveries"]["machine"], results["run"]
    assert f"{machine['cpu']}, {machine['nproc']} CPUs" in markdown
    assert f"PostgreSQL {machine['postgres']}" in markdown
    assert f"Python {machine['python']}" in markdown
    assert f"`{machine['commit']}`" in markdown
    assert f"{run['load_before']} before, {run['load_after']} after" in markdown
    assert f"`{run['command']}`" in markdown
    for step in run["steps"]:
        assert step in markdown


def test_each_throughput_is_shown_beside_its_ceiling(results, tmp_path):
    markdown, svgs = written(results, tmp_path)
    rows = throughput_rows(results["deliveries"])
    assert [r["label"] for r in rows] == [
        "realistic mix, 20 endpoints, 1 dispatcher",
        "realistic mix, 20 endpoints, 2 dispatchers",
        "instant, 20 endpoints, 1 dispatcher",
        "instant, 20 endpoints, 2 dispatchers",
        "100 ms, 20 endpoints, 1 dispatcher",
        "100 ms, 20 endpoints, 2 dispatchers",
    ]
    plotted = texts(svgs["throughput.svg"])
    for r in rows:
        line = next(
            x for x in markdown.splitlines() if x.startswith(f"| {r['label']} |")
        )
        assert f"| {number(r['rate'])} | {number(r['ceiling'])} |" in line
        assert number(r["rate"]) in plotted and number(r["ceiling"]) in plotted
        assert r["label"] in plotted


def test_latency_percentiles_are_plotted_at_each_steady_rate(results, tmp_path):
    markdown, svgs = written(results, tmp_path)
    rows = steady_rows(results["deliveries"])
    assert [r["label"] for r in rows] == [
        "50 events/s",
        "200 events/s",
        "500 events/s",
    ]
    plotted = texts(svgs["latency.svg"])
    assert {"p50", "p90", "p99"} <= set(plotted)
    for r in rows:
        for p in ("p50_ms", "p90_ms", "p99_ms"):
            assert number(r[p]) in plotted
        figures = (
            f"| {number(r['p50_ms'])} | {number(r['p90_ms'])} | {number(r['p99_ms'])} |"
        )
        assert figures in markdown


def test_cpu_per_delivery_is_the_dispatchers_cpu_over_deliveries_received(
    results, tmp_path
):
    _, svgs = written(results, tmp_path)
    rows = throughput_rows(results["deliveries"])
    first = rows[0]
    assert first["cpu_ms"] == pytest.approx(1000 * first["cpu_s"] / first["received"])
    plotted = texts(svgs["cpu.svg"])
    assert all(number(r["cpu_ms"]) in plotted for r in rows)


def test_publish_single_and_batch_show_requests_and_events_a_second(results, tmp_path):
    markdown, svgs = written(results, tmp_path)
    phases = results["publish"]["phases"]
    batch = phases["POST /events/batch (100)"]
    assert batch["events_s"] == pytest.approx(100 * batch["requests_s"], rel=0.01)
    plotted = texts(svgs["publish.svg"])
    for name, p in phases.items():
        assert f"| `{name}` | {number(p['requests_s'])} |" in markdown
        assert number(p["requests_s"]) in plotted
    assert number(batch["events_s"]) in plotted
    assert "POST /events/batch (100)" in plotted


def test_a_busy_run_says_so_with_its_load(results, tmp_path):
    results["run"].update(busy=True, load_before="2.43 2.07 2.61", waited_s=120)
    markdown, _ = written(results, tmp_path)
    assert "**Ran on a busy machine: load 2.43**" in markdown
    assert "after waiting 120 s for it to fall under 1" in markdown


def test_a_quiet_run_claims_no_busy_machine(results, tmp_path):
    results["run"].update(busy=False, load_before="0.42 0.80 1.10", waited_s=0)
    markdown, _ = written(results, tmp_path)
    assert "busy machine" not in markdown


def test_a_quick_run_says_its_figures_are_not_the_ones_to_quote(results, tmp_path):
    results["run"]["quick"] = True
    assert "**Quick run**" in written(results, tmp_path / "quick")[0]
    results["run"]["quick"] = False
    assert "Quick run" not in written(results, tmp_path / "full")[0]


def test_names_with_markup_characters_stay_well_formed_xml(results, tmp_path):
    # A phase or receiver name is text, never markup, in every plot.
    hostile = copy.deepcopy(results)
    phases = hostile["publish"]["phases"]
    phases["POST /events?a=<b>&c"] = phases.pop("POST /events")
    for row in hostile["deliveries"]["results"]:
        row["name"] = row["name"].replace("100ms", "<100ms&")
    _, svgs = written(hostile, tmp_path)
    assert "POST /events?a=<b>&c" in texts(svgs["publish.svg"])
    assert "<100ms&, 1 dispatcher" in texts(svgs["throughput.svg"])


def test_a_negative_postgresql_cpu_figure_is_not_shown(results, tmp_path):
    # api_load reads every postgres process on the machine; one that ends
    # during a phase takes its count away, so the difference can go negative.
    results["publish"]["cpu_ms"]["GET /healthz"] = {"web": 3.095, "database": -0.993}
    markdown, _ = written(results, tmp_path)
    row = next(x for x in markdown.splitlines() if x.startswith("| `GET /healthz` |"))
    assert row.endswith("| 3.095 | - |")
    assert "-0.993" not in markdown


def test_a_pipe_in_a_note_stays_inside_its_cell(results, tmp_path):
    results["deliveries"]["results"][-1]["notes"] = ["statuses {a|b}"]
    markdown, _ = written(results, tmp_path)
    row = next(x for x in markdown.splitlines() if "statuses" in x)
    assert row.endswith("| statuses {a\\|b} |")
    # Nine columns: ten unescaped pipes, as in the table's header.
    assert len(re.findall(r"(?<!\\)\|", row)) == 10
