"""Whether an item is answered from (and stored in) the response cache, and deduplicated in flight:
the batch's ``cache`` field when given (docs/contract.md §4), else the route's ``cache`` setting, else
off. A batch ``cache: true`` caches every item, any temperature; a route-level cache only items whose
``temperature`` is 0 (missing counts as above 0: a sampling workload is never cached nor deduplicated
without the batch asking)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def zero_temperature(params: Mapping[str, Any] | None) -> bool:
    value = (params or {}).get("temperature")
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


def applies(batch_cache: bool | None, route_cache: bool, params: Mapping[str, Any] | None) -> bool:
    """True when the item is cached and deduplicated (the precedence in the module docstring)."""
    if batch_cache is not None:
        return batch_cache
    return route_cache and zero_temperature(params)
