"""A server-rendered SVG line chart of deliveries and failures per minute.

Pure: takes the series, returns coordinates for the template, so the page
loads nothing from anywhere and the chart is testable without a browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

WIDTH = 720
HEIGHT = 160
PAD_LEFT = 40
PAD_BOTTOM = 20
PAD_TOP = 10


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    delivered_points: str
    failed_points: str
    peak: int
    total_delivered: int
    total_failed: int
    first_label: str
    last_label: str
    x0: int
    x1: int
    y_top: int
    y_base: int


def minute_chart(
    series: list[tuple[datetime, int, int]], *, width: int = WIDTH, height: int = HEIGHT
) -> Chart:
    """Two polylines (delivered, failed) scaled to the busiest minute."""
    peak = max([1] + [max(d, f) for _, d, f in series])
    plot_w = width - PAD_LEFT - 10
    plot_h = height - PAD_TOP - PAD_BOTTOM
    step = plot_w / max(1, len(series) - 1)

    def points(index: int) -> str:
        return " ".join(
            f"{PAD_LEFT + i * step:.1f},{PAD_TOP + plot_h - row[index] / peak * plot_h:.1f}"
            for i, row in enumerate(series)
        )

    return Chart(
        width=width,
        height=height,
        delivered_points=points(1),
        failed_points=points(2),
        peak=peak,
        total_delivered=sum(d for _, d, _ in series),
        total_failed=sum(f for _, _, f in series),
        first_label=series[0][0].strftime("%H:%M") if series else "",
        last_label=series[-1][0].strftime("%H:%M") if series else "",
        x0=PAD_LEFT,
        x1=PAD_LEFT + plot_w,
        y_top=PAD_TOP,
        y_base=PAD_TOP + plot_h,
    )
