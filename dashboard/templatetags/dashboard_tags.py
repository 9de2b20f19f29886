"""Small formatting helpers for the dashboard templates."""

from __future__ import annotations

import datetime as dt

from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def query_with(context, **changes) -> str:
    """The current query string with some parameters replaced (e.g. page links keep the filters)."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.filter
def ms(value) -> str:
    """Milliseconds as '850 ms' or '2.3 s'."""
    if value is None or value == "":
        return "—"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if value >= 10_000:
        return f"{value / 1000:.0f} s"
    if value >= 1000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


@register.filter
def pct(value, digits: int = 1) -> str:
    if value is None or value == "":
        return "—"
    return f"{float(value):.{int(digits)}f} %"


@register.filter
def duration(value) -> str:
    """A timedelta as '1 h 02 min', '3 min 05 s' or '12.4 s'."""
    if value is None:
        return "—"
    if not isinstance(value, dt.timedelta):
        return str(value)
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def num(value) -> str:
    """Thousands separators; '—' for missing values."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


@register.filter
def spaced(value) -> str:
    """'quota_exhausted' as 'quota exhausted': a column header that may wrap."""
    return str(value).replace("_", " ")


@register.filter
def get(mapping, key):
    if mapping is None:
        return None
    try:
        return mapping.get(key)
    except AttributeError:
        return None
