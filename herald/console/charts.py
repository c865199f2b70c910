"""Charts drawn on the server as SVG, each with a table of the same numbers.

No chart library and no script: the SVG is markup the page includes, sized
by a viewBox, coloured by classes of console.css (``series-0`` ...; the CSP
forbids style attributes), and named for screen readers (``role="img"``, a
``<title>`` and a ``<desc>``). Every chart comes with :attr:`Chart.table`,
the same numbers as rows, which the page shows beside it: a chart is never
the only way to read them.

Used as::

    chart = bar_chart("Messages by day", ["Nov 23", "Nov 24"], {"email": [3, 5], "sms": [1, 0]})
    {{ chart.svg }}   {# in a template: already escaped Markup #}
    {% include "macros/chart_table.html" %}   {# or render chart.table yourself #}
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH = 640
HEIGHT = 240
MARGIN_LEFT = 48
MARGIN_BOTTOM = 32
MARGIN_TOP = 12
MARGIN_RIGHT = 12
# Series beyond this share the last colour class.
COLOURS = 6
_ids = itertools.count(1)


@dataclass(frozen=True)
class Chart:
    """An SVG chart and its numbers: ``table[0]`` is the header row, then one row per label."""

    title: str
    svg: Markup
    table: list[list[str]]


def _nice_max(value: float) -> float:
    """The axis's top: the value rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _table(labels: Sequence[str], series: Mapping[str, Sequence[float]], label_header: str) -> list[list[str]]:
    names = list(series)
    rows = [[label_header, *names]]
    for index, label in enumerate(labels):
        rows.append([label, *(_number(series[name][index]) for name in names)])
    return rows


def _frame(title: str, description: str, top: float, body: list[str], labels: Sequence[str], step: float) -> Markup:
    chart_id = f"chart-{next(_ids)}"
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{chart_id}-title {chart_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}-title">{escape(title)}</title>',
        f'<desc id="{chart_id}-desc">{escape(description)}</desc>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = MARGIN_TOP + plot_height * (1 - fraction)
        parts.append(f'<line class="chart-grid" x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" y2="{y:.1f}"/>')
        parts.append(f'<text class="chart-axis" x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(_number(top * fraction))}</text>')
    parts.extend(body)
    # At most about 12 labels under the axis, evenly spread; the table has them all.
    every = max(1, (len(labels) + 11) // 12)
    for index, label in enumerate(labels):
        if index % every == 0:
            x = MARGIN_LEFT + step * (index + 0.5)
            parts.append(f'<text class="chart-axis" x="{x:.1f}" y="{HEIGHT - 10}" text-anchor="middle">{escape(label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _check(labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> None:
    for name, values in series.items():
        if len(values) != len(labels):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(labels)} labels")


def bar_chart(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]], *, label_header: str = "") -> Chart:
    """Grouped bars: one group per label, one bar per series."""
    _check(labels, series)
    top = _nice_max(max((max(values, default=0) for values in series.values()), default=0))
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    step = plot_width / max(1, len(labels))
    bar = step * 0.8 / max(1, len(series))
    body = []
    for group, label in enumerate(labels):
        for position, (name, values) in enumerate(series.items()):
            value = values[group]
            height = plot_height * value / top
            x = MARGIN_LEFT + step * group + step * 0.1 + bar * position
            y = MARGIN_TOP + plot_height - height
            body.append(
                f'<rect class="series-{min(position, COLOURS - 1)}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}">'
                f"<title>{escape(label)}, {escape(name)}: {escape(_number(value))}</title></rect>"
            )
    description = f"Bar chart of {', '.join(series)} for {len(labels)} {label_header.lower() or 'values'}; the table below has the numbers."
    return Chart(title, _frame(title, description, top, body, labels, step), _table(labels, series, label_header or "Label"))


def line_chart(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]], *, label_header: str = "") -> Chart:
    """One line per series over the labels (days, hours)."""
    _check(labels, series)
    top = _nice_max(max((max(values, default=0) for values in series.values()), default=0))
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    step = plot_width / max(1, len(labels))
    body = []
    for position, (name, values) in enumerate(series.items()):
        points = " ".join(
            f"{MARGIN_LEFT + step * (index + 0.5):.1f},{MARGIN_TOP + plot_height * (1 - value / top):.1f}"
            for index, value in enumerate(values)
        )
        body.append(f'<polyline class="line series-{min(position, COLOURS - 1)}" fill="none" points="{points}"><title>{escape(name)}</title></polyline>')
    description = f"Line chart of {', '.join(series)} over {len(labels)} {label_header.lower() or 'points'}; the table below has the numbers."
    return Chart(title, _frame(title, description, top, body, labels, step), _table(labels, series, label_header or "Label"))
