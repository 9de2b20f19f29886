"""Server-rendered SVG: escaped labels, one bar per non-zero value, stacked totals to scale."""

from __future__ import annotations

import re

import pytest

from dashboard import charts


def test_bar_chart_escapes_labels_and_draws_one_rect_per_value():
    svg = str(charts.bar_chart(["<b>", "ok", "zero"], [3, 7, 0], title='t "x" <y>'))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<b>" not in svg and "&lt;b&gt;" in svg
    assert "<y>" not in svg
    bars = re.findall(r"<rect x='[\d.]+' y='[\d.]+' width='[\d.]+' height='([\d.]+)' fill='#3b6fb6'>", svg)
    assert len(bars) == 2  # zero is not drawn
    assert float(bars[1]) > float(bars[0])


def test_stacked_chart_heights_follow_values():
    svg = str(
        charts.stacked_bar_chart(
            ["d1", "d2"],
            [charts.Series("a", "#111111", [10, 0]), charts.Series("b", "#222222", [30, 40])],
            title="tokens",
        )
    )
    heights = {
        color: [float(h) for h in re.findall(rf"height='([\d.]+)' fill='{color}'>", svg)]
        for color in ("#111111", "#222222")
    }
    assert len(heights["#111111"]) == 1 and len(heights["#222222"]) == 2
    assert heights["#222222"][0] == pytest.approx(3 * heights["#111111"][0], abs=0.2)


def test_empty_chart_says_so():
    assert "no data in this range" in str(charts.stacked_bar_chart([], [], title="nothing"))
