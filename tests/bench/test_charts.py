"""bench/charts.py: SVG text is text, never markup, and the axis has round ticks."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from bench.charts import axis_top, bar_chart, line_chart, number

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = {
    "title": "p99 <ms> & more",
    "unit": "a<b",
    "categories": ["<script>&", "plain"],
    "series": [("one & two", [1.5, None]), ("<three>", [None, 2.0])],
}


@pytest.mark.parametrize("chart", [bar_chart, line_chart])
def test_every_name_is_written_as_text(chart):
    svg = ET.fromstring(chart(**HOSTILE))
    written = [" ".join(t.itertext()) for t in svg.iter(f"{SVG}text")]
    for name in ("p99 <ms> & more", "a<b", "<script>&", "one & two", "<three>"):
        assert name in written
    assert svg.find(f"{SVG}title").text == "p99 <ms> & more"


@pytest.mark.parametrize(
    ("highest", "top", "step"),
    [(1942, 2000, 500), (11.3, 12.5, 2.5), (0.84, 1.0, 0.2), (0, 1.0, 0.2)],
)
def test_the_axis_ends_on_a_round_tick_above_the_highest_value(highest, top, step):
    assert axis_top(highest) == (pytest.approx(top), pytest.approx(step))


@pytest.mark.parametrize(
    ("value", "label"),
    [(1942.4, "1,942"), (100, "100"), (12.75, "12.8"), (0.85, "0.85")],
)
def test_values_are_labelled_with_three_figures_or_thousands(value, label):
    assert number(value) == label
