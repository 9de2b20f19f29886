"""The provider file (docs/contract.md §3): every field of a provider and a route entry, its JSON
type, whether it is required, its default and its bounds.

The one table behind the engine's ``ProviderConfig.from_dict`` / ``routing_table_from_config``, the
loader (``providers.services.load_provider_config``, ``manage.py load_providers``) and the Provider /
RoutingRule model field defaults and validators (providers/models.py). Django-free.

Keys the table does not know are ignored (docs/contract.md §3: "extra keys allowed"), but never
silently: ``unknown_keys`` names each with the closest known one ("`burst_second`: unknown field — did
you mean `burst_seconds`?"), for the file's top level, provider entries and route entries. The loader
prints them as warnings (``load_providers --strict`` refuses them); the engine's ``parse_entry`` warns
with ``ProviderFileWarning``.

A provider's ``kind`` (docs/contract.md §3, §5) brings fields of its own: ``kind_errors`` is the one check
of them (unknown kind, Azure's ``api_version`` and short windows, Azure-only fields on another kind),
used by ``parse_entry`` (so ``ProviderConfig.from_dict``), the loader and ``Provider.clean``.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .kinds import KINDS

JsonTypes = type | tuple[type, ...]


@dataclass(frozen=True)
class FieldSpec:
    types: JsonTypes  # accepted JSON types (true/false is never a number)
    required: bool = False
    default: Any = None  # for optional fields: the value when the key is absent
    minimum: float | None = None
    maximum: float | None = None

    @property
    def is_float(self) -> bool:
        return isinstance(self.types, tuple) and float in self.types


PROVIDER_FIELDS: dict[str, FieldSpec] = {
    "name": FieldSpec(str, required=True),
    "base_url": FieldSpec(str, required=True),
    "model": FieldSpec(str, required=True),
    "rpm": FieldSpec(int, required=True, minimum=1, maximum=1_000_000),
    "tpm": FieldSpec(int, required=True, minimum=1, maximum=1_000_000_000),
    "max_concurrency": FieldSpec(int, required=True, minimum=1, maximum=10_000),
    "burst_seconds": FieldSpec((int, float), default=5.0, minimum=1.0, maximum=3_600),
    "timeout_seconds": FieldSpec((int, float), default=30.0, minimum=0.1, maximum=3_600),
    "max_retries": FieldSpec(int, default=3, minimum=0, maximum=20),
    "enabled": FieldSpec(bool, default=True),
    "api_key": FieldSpec(str, default=""),
    # the provider-adapter fields (docs/contract.md §3; checked together by kind_errors)
    "kind": FieldSpec(str, default="openai"),
    "deployment": FieldSpec(str, default=""),
    "api_version": FieldSpec(str, default=""),
    "region": FieldSpec(str, default=""),  # bedrock: the AWS region requests are signed for
    "aws_access_key_id": FieldSpec(str, default=""),  # bedrock (its secret access key is api_key)
    "itpm": FieldSpec(int, default=None, minimum=1, maximum=1_000_000_000),
    "otpm": FieldSpec(int, default=None, minimum=1, maximum=1_000_000_000),
    # shared keys: follow the provider's remaining-quota headers (kinds that send none: no effect)
    "adaptive": FieldSpec(bool, default=True),
    # the provider-batch fields (docs/contract.md §3 and its documented extensions; checked together
    # by kind_problems; the kind-dependent defaults of the None ones come from batch_limits)
    "batch_api": FieldSpec(bool, default=False),
    "batch_deployment": FieldSpec(str, default=""),
    "batch_price_factor": FieldSpec((int, float), default=0.5, minimum=0.01, maximum=1.0),
    "batch_turnaround_seconds": FieldSpec(int, default=86_400, minimum=1, maximum=30 * 86_400),
    "batch_min_window_seconds": FieldSpec(int, default=None, minimum=1, maximum=30 * 86_400),
    "batch_max_requests": FieldSpec(int, default=None, minimum=1, maximum=1_000_000),
    "batch_max_bytes": FieldSpec(int, default=None, minimum=1024, maximum=10_000_000_000),
    "batch_max_enqueued_tokens": FieldSpec(int, default=None, minimum=1, maximum=100_000_000_000),
}
ROUTE_FIELDS: dict[str, FieldSpec] = {
    "route": FieldSpec(str, required=True),
    "provider": FieldSpec(str, required=True),
    "priority": FieldSpec(int, default=0, minimum=0, maximum=1000),
    "weight": FieldSpec(int, default=1, minimum=1, maximum=1_000_000),
    "enabled": FieldSpec(bool, default=True),
    # the response cache for this route's items at temperature 0 (issue #25, docs/cache.md)
    "cache": FieldSpec(bool, default=False),
}
SECRET_FIELDS = frozenset({"api_key"})
# the file's top level
FILE_KEYS: tuple[str, ...] = ("providers", "routes")
# provider fields docs/contract.md §3 names that this gateway does not implement yet: a file may carry
# them, they are ignored (and said so). None today: batch_api (#23) and adaptive (#24) are implemented.
CONTRACT_ONLY_PROVIDER_FIELDS: frozenset[str] = frozenset()
# a free-text note, allowed anywhere without a warning (as in examples/sim.json)
NOTE_KEYS = frozenset({"comment"})

# The provider kinds of docs/contract.md §3 and what each one changes: every table below is derived from
# the one descriptor per kind in gateway_engine/kinds.py (the Provider model's choices and kind_errors
# read these). Each kind is spoken by a wire format (gateway_engine.wire.KNOWN_KINDS; a test holds the
# two equal). Sorted, as KNOWN_KINDS is.
PROVIDER_KINDS: tuple[str, ...] = tuple(sorted(KINDS))
# the kinds whose answers carry remaining-quota headers the buckets follow: ``adaptive`` has an effect
# only there (Gemini sends none)
REMAINING_HEADER_KINDS: frozenset[str] = frozenset(k for k, d in KINDS.items() if d.headers.followed)


def effective_adaptive(kind: str, adaptive: bool) -> bool:
    """Whether the buckets follow the provider's remaining-quota headers: ``adaptive`` on a kind that
    sends them."""
    return bool(adaptive) and kind in REMAINING_HEADER_KINDS


# fields only one kind reads: given for another kind they would be silently ignored, so they are refused
KIND_ONLY_FIELDS: dict[str, str] = {f: k for k, d in KINDS.items() for f in d.only_fields}
# the kinds whose own batch API the gateway speaks (gateway_engine.batch_api); batch_api is refused on
# the others (gemini) with the field named
BATCH_API_KINDS: tuple[str, ...] = tuple(sorted(k for k, d in KINDS.items() if d.batch_api))
# each kind's published batch limits: (max requests per batch, max input-file bytes)
BATCH_KIND_LIMITS: dict[str, tuple[int, int]] = {
    k: (d.batch_api.max_requests, d.batch_api.max_bytes) for k, d in KINDS.items() if d.batch_api
}
# the values a kind gives a field the entry omits (elsewhere the table's default)
KIND_DEFAULTS: dict[str, dict[str, Any]] = {k: dict(d.defaults) for k, d in KINDS.items() if d.defaults}
# the fields kind_errors reads: the kind, every kind-only and kind-required field, the burst and batch_api
KIND_CHECKED_FIELDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        ["kind", "burst_seconds", "batch_api"]
        + [f for d in KINDS.values() for f in (*d.only_fields, *d.required_fields)]
        + [f for d in KINDS.values() if d.batch_api for f in d.batch_api.required_fields]
    )
)


@dataclass(frozen=True)
class BatchLimits:
    """One provider's batch-API settings with the kind's defaults filled in (docs/provider_batches.md)."""

    enabled: bool
    price_factor: float
    turnaround_seconds: int
    min_window_seconds: int
    max_requests: int
    max_bytes: int
    max_enqueued_tokens: int | None
    deployment: str


def batch_limits(kind: str, values: Mapping[str, Any]) -> BatchLimits:
    """The batch settings of a provider of ``kind`` (a field absent or None takes its default: the
    kind's published limits, ``batch_min_window_seconds`` = the turnaround)."""

    def given(name: str) -> Any:
        value = values.get(name)
        return PROVIDER_FIELDS[name].default if value is None else value

    max_requests, max_bytes = BATCH_KIND_LIMITS.get(kind, BATCH_KIND_LIMITS["openai"])
    turnaround = int(given("batch_turnaround_seconds"))
    return BatchLimits(
        enabled=bool(given("batch_api")) and kind in BATCH_API_KINDS,
        price_factor=float(given("batch_price_factor")),
        turnaround_seconds=turnaround,
        min_window_seconds=int(values.get("batch_min_window_seconds") or turnaround),
        max_requests=int(values.get("batch_max_requests") or max_requests),
        max_bytes=int(values.get("batch_max_bytes") or max_bytes),
        max_enqueued_tokens=(
            int(values["batch_max_enqueued_tokens"]) if values.get("batch_max_enqueued_tokens") else None
        ),
        deployment=str(given("batch_deployment") or ""),
    )


def kind_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every kind-specific problem of one provider's values (a field absent from
    ``values`` is taken as its default). An unknown kind is the only problem reported for it: the
    other checks depend on the kind."""
    kind = values.get("kind", PROVIDER_FIELDS["kind"].default)
    if kind not in PROVIDER_KINDS:
        return [("kind", f"unknown kind {kind!r} (known: {', '.join(PROVIDER_KINDS)})")]
    problems = [
        (name, f"only for kind {owner}, not for kind {kind}")
        for name, owner in KIND_ONLY_FIELDS.items()
        if values.get(name) and kind != owner
    ]
    descriptor = KINDS[kind]
    if values.get("batch_api") and descriptor.batch_api is None:
        why = f" ({descriptor.why_no_batch_api})" if descriptor.why_no_batch_api else ""
        problems.append(
            (
                "batch_api",
                f"kind {kind} has no batch API the gateway speaks{why} (kinds: {', '.join(BATCH_API_KINDS)})",
            )
        )
    if values.get("batch_api") and descriptor.batch_api is not None:
        problems += [
            (name, f"required with batch_api for kind {kind} ({what})")
            for name, what in descriptor.batch_api.required_fields.items()
            if not str(values.get(name) or "").strip()
        ]
    problems += [
        (name, f"required for kind {kind}")
        for name in descriptor.required_fields
        if not str(values.get(name) or "").strip()
    ]
    cap = descriptor.max_burst_seconds
    burst = values.get("burst_seconds", cap)
    if cap is not None and isinstance(burst, int | float) and burst > cap:
        problems.append(
            (
                "burst_seconds",
                f"must be at most {cap:g} for kind {kind} (the provider enforces its limits over "
                f"short windows: {descriptor.headers.source}), got {burst!r}",
            )
        )
    return problems


def kind_errors(where: str, values: Mapping[str, Any]) -> list[str]:
    """The kind-specific problems of one provider entry, each as '<where>.<field>: …'
    (``providers[2].api_version: required for kind azure_openai``)."""
    return [f"{where}.{name}: {message}" for name, message in kind_problems(values)]


def kind_defaults(kind: Any) -> dict[str, Any]:
    """The values kind ``kind`` gives fields an entry omits ({} for most kinds)."""
    return dict(KIND_DEFAULTS.get(kind, {})) if isinstance(kind, str) else {}


class ProviderFileWarning(UserWarning):
    """A key of the provider file that nothing reads (a typo, or a field this gateway lacks)."""


def unknown_keys(where: str, entry: Any, known: Iterable[str], unsupported: Iterable[str] = ()) -> list[str]:
    """One sentence per key of ``entry`` that is not in ``known``: '<where>: `key`: unknown field — did
    you mean `known_key`?' (difflib's closest match, case-insensitive), or '… not supported by this
    gateway' for the contract's ``unsupported`` fields. [] for a non-object (type checks say that)."""
    if not isinstance(entry, Mapping):
        return []
    known = list(known)
    unsupported = frozenset(unsupported)
    by_lower = {name.lower(): name for name in known}
    found = []
    for key in entry:
        if key in known or key in NOTE_KEYS:
            continue
        if key in unsupported:
            found.append(f"{where}: `{key}`: not supported by this gateway (docs/contract.md §3)")
            continue
        close = difflib.get_close_matches(str(key).lower(), list(by_lower), n=1, cutoff=0.6)
        if close:
            found.append(f"{where}: `{key}`: unknown field — did you mean `{by_lower[close[0]]}`?")
        else:
            found.append(f"{where}: `{key}`: unknown field (known: {', '.join(known)})")
    return found


def defaults(spec: Mapping[str, FieldSpec]) -> dict[str, Any]:
    """{field: default} of the optional fields."""
    return {name: f.default for name, f in spec.items() if not f.required}


def _type_name(types: JsonTypes) -> str:
    return types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)


def type_errors(where: str, entry: Any, spec: Mapping[str, FieldSpec]) -> list[str]:
    """Missing required fields and values of the wrong JSON type, each as '<where>.<field>: …'."""
    if not isinstance(entry, Mapping):
        return [f"{where}: must be an object"]
    errors = []
    for name, f in spec.items():
        if name not in entry:
            if f.required:
                errors.append(f"{where}.{name}: is required")
            continue
        value = entry[name]
        types = f.types if isinstance(f.types, tuple) else (f.types,)
        # bool is an int subclass in Python: refuse true/false where a number is expected
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            errors.append(
                f"{where}.{name}: must be {_type_name(f.types)}, got {type(value).__name__} {value!r}"
            )
    return errors


def bound_errors(where: str, values: Mapping[str, Any], spec: Mapping[str, FieldSpec]) -> list[str]:
    """Numbers outside a field's [minimum, maximum] (well-typed values only)."""
    errors = []
    for name, value in values.items():
        f = spec.get(name)
        if f is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if f.minimum is not None and value < f.minimum:
            errors.append(f"{where}.{name}: must be at least {f.minimum}, got {value!r}")
        elif f.maximum is not None and value > f.maximum:
            errors.append(f"{where}.{name}: must be at most {f.maximum}, got {value!r}")
    return errors


def given_values(entry: Mapping[str, Any], spec: Mapping[str, FieldSpec]) -> dict[str, Any]:
    """The known fields the entry gives (numbers of float fields as float); no defaults added."""
    return {
        name: float(entry[name]) if spec[name].is_float else entry[name] for name in spec if name in entry
    }


def parse_entry(where: str, entry: Any, spec: Mapping[str, FieldSpec]) -> dict[str, Any]:
    """Every field of one entry: checked (types, required, bounds), defaults filled in. Raises
    ValueError naming every problem; a key the table does not know is ignored with a
    ProviderFileWarning naming it (and the closest known field)."""
    unsupported = CONTRACT_ONLY_PROVIDER_FIELDS if spec is PROVIDER_FIELDS else ()
    for problem in unknown_keys(where, entry, spec, unsupported):
        warnings.warn(problem, ProviderFileWarning, stacklevel=3)
    errors = type_errors(where, entry, spec)
    values: dict[str, Any] = {}
    if not errors:
        values = given_values(entry, spec)
        errors = bound_errors(where, values, spec)
    if spec is PROVIDER_FIELDS and not errors:
        values = {**kind_defaults(values.get("kind")), **values}
        errors = kind_errors(where, values)
    if errors:
        raise ValueError("; ".join(errors))
    return {**defaults(spec), **values}
