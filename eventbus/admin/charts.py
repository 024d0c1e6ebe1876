"""Line charts over time for the status page, as geometry the templates draw as inline SVG.

A chart is a plot area with a time axis (labelled ticks), a value axis (0, half, top), one
polyline per series with a marked, titled point for every non-zero value, and a legend. The
geometry is computed here only: the page draws it from
`templates/admin/eventbus/includes/line_chart.svg.html`, and the live update
(`static/eventbus/status.js`) redraws the same elements from `as_json(chart)`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT = 480, 210  # drawn at about this size: two side by side at 1280 px
LEFT, RIGHT, TOP, BOTTOM = 66, 10, 28, 24  # room for the value labels, the legend, the times
LEGEND_STEP = 110
# Axis tops for durations: whole seconds, minutes, hours (the half-way tick reads well too).
NICE_SECONDS = (10, 20, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    value: float
    title: str  # "12:05 · 3 done"


@dataclass(frozen=True)
class Line:
    name: str  # done, failed, dead, lag: the CSS class and data-series
    label: str
    points: list[Point]

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)

    @property
    def marks(self) -> list[Point]:
        return [p for p in self.points if p.value]

    @property
    def marks_svg(self) -> SafeString:
        """A titled circle per non-zero point, escaped: built here, not by a template loop, which
        took most of the page's rendering time for a day of quarters (hundreds of points)."""
        return format_html_join(
            "",
            '<circle cx="{}" cy="{}" r="2.5" data-value="{}"><title>{}</title></circle>',
            ((f"{p.x:.1f}", f"{p.y:.1f}", f"{p.value:g}", p.title) for p in self.marks),
        )


@dataclass(frozen=True)
class Tick:
    at: float  # x or y in the chart's coordinates
    label: str


@dataclass(frozen=True)
class LegendItem:
    x: int
    name: str
    label: str


@dataclass(frozen=True)
class LineChart:
    name: str
    title: str
    lines: list[Line]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    legend: list[LegendItem]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    right: int = WIDTH - RIGHT
    bottom: int = HEIGHT - BOTTOM


@dataclass(frozen=True)
class Series:
    name: str
    label: str
    values: Sequence[float]


def line_chart(
    name: str,
    title: str,
    times: Sequence[dt.datetime],
    series: Sequence[Series],
    *,
    tick_every: int,
    value_label: Callable[[float], str] = lambda v: f"{v:,.0f}",
    seconds: bool = False,
    time_format: str = "%H:%M",
) -> LineChart:
    """Geometry of `series` (one value per time, oldest first), a time label every
    `tick_every` points (`time_format`: strftime); `seconds`: the values are durations (the axis
    top a round one)."""
    peak = max((v for s in series for v in s.values), default=0.0)
    top = _nice_seconds(peak) if seconds else _nice(peak)
    xs = _xs(len(times))
    lines = [
        Line(s.name, s.label, _points(xs, times, s, top, value_label, time_format=time_format))
        for s in series
    ]
    x_ticks = [Tick(xs[i], f"{times[i]:{time_format}}") for i in range(0, len(times), tick_every)]
    y_ticks = [Tick(_y(v, top), value_label(v)) for v in (0.0, top / 2, top)]
    legend = [LegendItem(LEFT + i * LEGEND_STEP, s.name, s.label) for i, s in enumerate(series)]
    return LineChart(name, title, lines, x_ticks, y_ticks, legend)


def _xs(n: int) -> list[float]:
    span = WIDTH - RIGHT - LEFT
    return [LEFT + span * i / max(n - 1, 1) for i in range(n)]


def _y(value: float, top: float) -> float:
    span = HEIGHT - BOTTOM - TOP
    return HEIGHT - BOTTOM - span * value / top


def _points(
    xs: Sequence[float],
    times: Sequence[dt.datetime],
    series: Series,
    top: float,
    value_label: Callable[[float], str],
    *,
    time_format: str,
) -> list[Point]:
    return [
        Point(x, _y(value, top), value, f"{at:{time_format}} · {value_label(value)} {series.label}")
        for x, at, value in zip(xs, times, series.values, strict=True)
    ]


def as_json(chart: LineChart) -> dict[str, Any]:
    """The chart's geometry as JSON (what the live update redraws), rounded as the template."""
    return {
        "name": chart.name,
        "title": chart.title,
        "box": [chart.width, chart.height, chart.left, chart.top, chart.right, chart.bottom],
        "x_ticks": [[round(t.at, 1), t.label] for t in chart.x_ticks],
        "y_ticks": [[round(t.at, 1), t.label] for t in chart.y_ticks],
        "lines": [
            {
                "name": line.name,
                "label": line.label,
                "path": line.path,
                "marks": [
                    [round(p.x, 1), round(p.y, 1), f"{p.value:g}", p.title] for p in line.marks
                ],
            }
            for line in chart.lines
        ],
        "legend": [[item.x, item.name, item.label] for item in chart.legend],
    }


def _nice(peak: float) -> float:
    """The axis top: the peak rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if peak <= 1:
        return 1.0
    magnitude = 10 ** (len(str(int(peak))) - 1)
    for factor in (1, 2, 5, 10):
        if peak <= factor * magnitude:
            return float(factor * magnitude)
    return float(10 * magnitude)


def _nice_seconds(peak: float) -> float:
    """The axis top for durations: the first of NICE_SECONDS at or above the peak."""
    return float(next((top for top in NICE_SECONDS if peak <= top), _nice(peak)))
