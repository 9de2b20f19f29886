"""The Provider model's check constraints that hold a row to its kind's rules, derived from the kinds'
descriptors (gateway_engine/kinds.py): one ``provider_<kind>_complete`` per kind with required fields
or a burst cap. A descriptor change here needs a migration (tests/engine/test_kind_registration.py)."""

from __future__ import annotations

from django.db import models

from gateway_engine.kinds import ProviderKind, complete_kinds


def kind_constraint(kind: str, descriptor: ProviderKind) -> models.CheckConstraint:
    """``provider_<kind>_complete``: a row of ``kind`` has its required fields and a burst within the
    kind's cap (provider_file.kind_problems says the same, naming the field)."""
    rule = models.Q()
    said = []
    if descriptor.max_burst_seconds is not None:
        rule &= models.Q(burst_seconds__lte=descriptor.max_burst_seconds)
        said.append(f"burst_seconds at most {descriptor.max_burst_seconds:g}")
    for name in descriptor.required_fields:
        rule &= ~models.Q(**{name: ""})
    return models.CheckConstraint(
        condition=~models.Q(kind=kind) | rule,
        name=f"provider_{kind.removesuffix('_openai')}_complete",
        violation_error_message=f"kind {kind} needs {' and '.join([*descriptor.required_fields, *said])}",
    )


KIND_CONSTRAINTS = [kind_constraint(kind, d) for kind, d in sorted(complete_kinds().items())]
