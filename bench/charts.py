"""Small SVG charts for bench/report.py: grouped bars and lines, standard library only.

Each chart is one self-contained SVG string (a title, a y axis from zero with
about five ticks, a legend, and every value written beside its bar or point),
so a page shows it as an image and a reader can take the numbers from it.
"""

from __future__ import annotations

import math
import textwrap
from xml.sax.saxutils import escape, quoteattr

WIDTH, HEIGHT = 800, 400
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 72, 60  # margins around the plot area
LINE = 12  # pixels between lines of a category's label, and between point labels
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
COLOURS = ("#3366cc", "#aaaaaa", "#dc7633", "#2e8b57", "#8e44ad")
FONT = 'font-family="sans-serif"'

Series = tuple[str, list[float | None]]


def number(value: float) -> str:
    """A value as a chart label: thousands separated, three figures under 100."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def axis_top(highest: float) -> tuple[float, float]:
    """The y axis's top and its tick step: a 1, 2, 2.5 or 5 step, about 5 ticks."""
    if highest <= 0:
        return 1.0, 0.2
    raw = highest / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if raw <= m * magnitude)
    return step * math.ceil(highest / step - 1e-9), step


def _text(x: float, y: float, text: str, **attrs: str) -> str:
    extra = "".join(f" {k.replace('_', '-')}={quoteattr(v)}" for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" {FONT}{extra}>{escape(text)}</text>'


def _frame(*, title: str, unit: str, top: float, step: float) -> list[str]:
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f"aria-label={quoteattr(title)}>",
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        _text(WIDTH / 2, 22, title, text_anchor="middle", font_size="15"),
        _text(8, TOP - 12, unit, font_size="11", fill="#444444"),
    ]
    ticks = round(top / step)
    for i in range(ticks + 1):
        y = TOP + PLOT_H - PLOT_H * i / ticks
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + PLOT_W}" y2="{y:.1f}" '
            f'stroke="#e5e5e5"/>'
        )
        parts.append(
            _text(LEFT - 6, y + 4, number(step * i), text_anchor="end", font_size="11")
        )
    parts.append(
        f'<line x1="{LEFT}" y1="{TOP + PLOT_H}" x2="{LEFT + PLOT_W}" '
        f'y2="{TOP + PLOT_H}" stroke="#333333"/>'
    )
    return parts


def _legend(names: list[str]) -> list[str]:
    parts, x = [], LEFT
    for i, name in enumerate(names):
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<rect x="{x}" y="34" width="12" height="12" fill="{colour}"/>')
        parts.append(_text(x + 16, 44, name, font_size="12"))
        x += 28 + 7 * len(name)
    return parts


def _category_labels(categories: list[str]) -> list[str]:
    """Each category's name under its slot, wrapped to the slot's width."""
    slot = PLOT_W / len(categories)
    parts = []
    for i, name in enumerate(categories):
        x = LEFT + slot * (i + 0.5)
        lines = textwrap.wrap(name, max(8, int(slot / 6.5)))
        spans = "".join(
            f'<tspan x="{x:.1f}" dy="{0 if n == 0 else LINE}">{escape(line)}</tspan>'
            for n, line in enumerate(lines)
        )
        y = TOP + PLOT_H + 16
        parts.append(
            f'<text x="{x:.1f}" y="{y}" {FONT} font-size="11" '
            f'text-anchor="middle">{spans}</text>'
        )
    return parts


def _highest(series: list[Series]) -> float:
    return max((v for _, values in series for v in values if v is not None), default=0)


def bar_chart(
    *, title: str, unit: str, categories: list[str], series: list[Series]
) -> str:
    """Bars grouped by category, one colour a series; None leaves a gap."""
    top, step = axis_top(_highest(series))
    parts = _frame(title=title, unit=unit, top=top, step=step)
    slot = PLOT_W / len(categories)
    width = slot * 0.8 / len(series)
    for s, (_, values) in enumerate(series):
        colour = COLOURS[s % len(COLOURS)]
        for i, value in enumerate(values):
            if value is None:
                continue
            height = PLOT_H * value / top
            x = LEFT + slot * i + slot * 0.1 + width * s
            y = TOP + PLOT_H - height
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
                f'height="{height:.1f}" fill="{colour}"/>'
            )
            parts.append(
                _text(
                    x + width / 2,
                    y - 4,
                    number(value),
                    text_anchor="middle",
                    font_size="10",
                )
            )
    parts += _legend([name for name, _ in series]) + _category_labels(categories)
    return "\n".join([*parts, "</svg>"]) + "\n"


def line_chart(
    *, title: str, unit: str, categories: list[str], series: list[Series]
) -> str:
    """One line a series across evenly spaced categories; None breaks the line."""
    top, step = axis_top(_highest(series))
    parts = _frame(title=title, unit=unit, top=top, step=step)
    slot = PLOT_W / len(categories)
    labels: dict[float, list[tuple[float, float]]] = {}  # x: [(y, value)]
    for s, (_, values) in enumerate(series):
        colour = COLOURS[s % len(COLOURS)]
        points = [
            (LEFT + slot * (i + 0.5), TOP + PLOT_H - PLOT_H * value / top, value)
            for i, value in enumerate(values)
            if value is not None
        ]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" '
                f'stroke-width="2"/>'
            )
        for x, y, value in points:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
            labels.setdefault(x, []).append((y, value))
    # Close values share a height: each label at least a line below the one above.
    for x, at in labels.items():
        floor = -math.inf
        for y, value in sorted(at):
            floor = max(y + 4, floor + LINE)
            parts.append(_text(x + 8, floor, number(value), font_size="10"))
    parts += _legend([name for name, _ in series]) + _category_labels(categories)
    return "\n".join([*parts, "</svg>"]) + "\n"
