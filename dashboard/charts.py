"""Server-rendered SVG charts: no JavaScript, no CDN, works offline.

Every label is HTML-escaped before it goes into the markup; the functions return SafeString.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# 13 user units: a chart is drawn at most at its viewBox width, so labels are never below ~12 px on screen
# in the layouts used (full width, or half of a 1280 px page with width=600).
FONT = "font-family='system-ui, sans-serif' font-size='13'"
CHAR_WIDTH = 7.5  # average width of a 13-unit label character
LABEL_ROW = 16


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    values: Sequence[float]


@dataclass(frozen=True)
class _Box:
    left: int
    right: int
    top: int
    plot_w: float
    plot_h: float
    every: int  # label every n-th bar
    two_rows: bool  # labels alternate between two rows


def _plot_box(labels: Sequence[str], width: int, height: int, label_every: int | None) -> _Box:
    left, right, top, bottom = 60, 12, 30, 48
    n = len(labels)
    plot_w = width - left - right
    every = label_every or max(1, -(-n * 64 // plot_w))  # at least ~64 units between x labels
    # labels wider than their slot alternate between two rows instead of overlapping
    widest = max((len(label) for label in labels), default=0) * CHAR_WIDTH
    two_rows = widest > plot_w / max(n, 1) * every
    if two_rows:
        bottom += LABEL_ROW
    return _Box(left, right, top, plot_w, height - top - bottom, every, two_rows)


def _nice_max(value: float) -> float:
    """A round axis maximum ≥ value (1, 2, 2.5, 5 × 10^k)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10.0 * magnitude


def _short(value: float) -> str:
    if value >= 1_000_000_000:
        return f"{value / 1_000_000_000:.3g}G"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.3g}" if value != int(value) else str(int(value))


def _svg_open(title: str, width: int, height: int, left: int) -> list[str]:
    """The opening <svg> tag, the accessible title and the visible heading."""
    return [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='chart' role='img' viewBox='0 0 {width} {height}' "
        f"width='100%' data-max-width='{width}' aria-label='{escape(title)}'>",  # dashboard.js: no style attribute under the CSP
        f"<title>{escape(title)}</title>",
        f"<text x='{left}' y='16' {FONT} font-weight='600'>{escape(title)}</text>",
    ]


def _y_grid(box: _Box, width: int, y_max: float) -> list[str]:
    """Horizontal grid lines with their values on the y axis."""
    left, right, top, plot_h = box.left, box.right, box.top, box.plot_h
    parts = []
    for k in range(5):
        value = y_max * k / 4
        y = top + plot_h - plot_h * k / 4
        parts.append(f"<line x1='{left}' x2='{width - right}' y1='{y:.1f}' y2='{y:.1f}' stroke='#e3e6ea'/>")
        parts.append(
            f"<text x='{left - 6}' y='{y + 4:.1f}' {FONT} text-anchor='end' fill='#555'>{_short(value)}</text>"
        )
    return parts


def _no_data(box: _Box) -> str:
    return (
        f"<text x='{box.left + box.plot_w / 2:.0f}' y='{box.top + box.plot_h / 2:.0f}' {FONT} text-anchor='middle' "
        "fill='#777'>no data in this range</text>"
    )


def _stacked_bars(labels: Sequence[str], series: Sequence[Series], box: _Box, y_max: float) -> list[str]:
    """One stacked bar per label (series bottom-up), with the x labels every box.every bars."""
    left, top, plot_w, plot_h = box.left, box.top, box.plot_w, box.plot_h
    slot = plot_w / max(len(labels), 1)
    bar_w = max(2.0, slot * 0.7)
    parts = []
    for i, label in enumerate(labels):
        x = left + slot * i + (slot - bar_w) / 2
        y = top + plot_h
        for s in series:
            v = s.values[i]
            if v <= 0:
                continue
            h = plot_h * v / y_max
            y -= h
            parts.append(
                f"<rect x='{x:.1f}' y='{y:.1f}' width='{bar_w:.1f}' height='{h:.1f}' fill='{s.color}'>"
                f"<title>{escape(label)} · {escape(s.name)}: {v:,.0f}</title></rect>"
            )
        if i % box.every == 0:
            row = (i // box.every) % 2 if box.two_rows else 0
            parts.append(
                f"<text x='{x + bar_w / 2:.1f}' y='{top + plot_h + 16 + row * LABEL_ROW}' {FONT} text-anchor='middle' "
                f"fill='#333'>{escape(label)}</text>"
            )
    return parts


def _legend(series: Sequence[Series], left: int, height: int) -> list[str]:
    """A colour swatch and name per series along the bottom edge."""
    parts = []
    lx = left
    for s in series:
        parts.append(f"<rect x='{lx}' y='{height - 15}' width='11' height='11' fill='{s.color}'/>")
        parts.append(f"<text x='{lx + 15}' y='{height - 5}' {FONT}>{escape(s.name)}</text>")
        lx += 28 + 8 * len(s.name)
    return parts


def stacked_bar_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    width: int = 860,
    height: int = 260,
    label_every: int | None = None,
) -> SafeString:
    """Vertical bars, one per label, each split into the given series (stacked bottom-up)."""
    box = _plot_box(labels, width, height, label_every)
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    y_max = _nice_max(max(totals, default=0))
    parts = _svg_open(title, width, height, box.left)
    parts += _y_grid(box, width, y_max)
    if len(labels) == 0:
        parts.append(_no_data(box))
    parts += _stacked_bars(labels, series, box, y_max)
    parts += _legend(series, box.left, height)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every dynamic piece above is escaped


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    color: str = "#3b6fb6",
    width: int = 860,
    height: int = 220,
) -> SafeString:
    """Simple vertical bars (e.g. a latency histogram), value printed above each bar."""
    chart = stacked_bar_chart(
        labels, [Series("items", color, values)], title=title, width=width, height=height, label_every=1
    )
    # annotate each bar with its count (cheap second pass over the same geometry)
    box = _plot_box(labels, width, height, 1)
    left, top, plot_w, plot_h = box.left, box.top, box.plot_w, box.plot_h
    n = len(labels)
    y_max = _nice_max(max(values, default=0))
    slot = plot_w / max(n, 1)
    notes = []
    for i, v in enumerate(values):
        if v <= 0:
            continue
        x = left + slot * i + slot / 2
        y = top + plot_h - plot_h * v / y_max - 3
        notes.append(
            f"<text x='{x:.1f}' y='{y:.1f}' {FONT} text-anchor='middle' fill='#222'>{_short(v)}</text>"
        )
    return mark_safe(chart.replace("</svg>", "".join(notes) + "</svg>"))  # noqa: S308
