"""Error classes as SQL (docs/seed.md §5.3 step one: which provider, 4xx or 5xx): the batch page's
per-provider breakdown and the failures browser group failed items with these.

Generated from the engine's ONE classifier (gateway_engine.retry.ERROR_CLASS_TABLE, built from the
error-kind table's class column): the SQL below and the
engine's classifier cannot disagree.
"""

from __future__ import annotations

from django.db.models import Case, Q, Value, When

from gateway_engine.error_kinds import CLASS_OTHER, OTHER_LABEL
from gateway_engine.retry import ERROR_CLASS_KEYS, ERROR_CLASS_TABLE, ErrorClassRule

ERROR_CLASSES = [(rule.key, rule.label) for rule in ERROR_CLASS_TABLE] + [(CLASS_OTHER, OTHER_LABEL)]


def _rule_q(rule: ErrorClassRule) -> Q:
    """The rule as a Q: error_type in its types OR status code in its range (NULL status: no match)."""
    q = Q(error_type__in=sorted(rule.types)) if rule.types else Q(pk__in=[])
    if (bounds := rule.status_range) is not None:
        q |= Q(error_status_code__gte=bounds[0], error_status_code__lt=bounds[1])
    return q


# Mutually exclusive, checked in table order (a 429 is not counted as a generic 4xx).
_CLASS_CONDITIONS: list[tuple[str, Q]] = [(rule.key, _rule_q(rule)) for rule in ERROR_CLASS_TABLE]


def error_class_q(klass: str) -> Q:
    """Q selecting failed items of one error class (same precedence as the grouped counts)."""
    q = Q()
    for key, cond in _CLASS_CONDITIONS:
        if key == klass:
            return q & cond
        q &= ~cond
    if klass == CLASS_OTHER:
        return q
    raise ValueError(f"unknown error class {klass!r}; expected one of {ERROR_CLASS_KEYS}")


def error_class_expr() -> Case:
    """SQL CASE giving each row its class, generated from the table."""
    return Case(*[When(cond, then=Value(key)) for key, cond in _CLASS_CONDITIONS], default=Value(CLASS_OTHER))
