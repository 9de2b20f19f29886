"""The kind-specific part of a simulated provider's configuration (issue #21).

A provider speaks one of five wire formats (``kind``); each kind takes only the options its real API has,
so a config that asks an OpenAI provider for a per-day quota, or an Anthropic one for a content filter, is
refused naming the field instead of silently doing nothing. All durations and rates are in *simulated*
units, like the rest of the config (``time_scale`` compresses them).

Fault *forms* are named, per kind, because the same status means different things at different providers
(an Anthropic 529 is load across all customers, an OpenAI 429 ``insufficient_quota`` is billing): a test
asks for the form it means and the simulator answers it with that provider's own status, body and
headers (sim/forms.py renders them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

KINDS = ("openai", "azure_openai", "anthropic", "gemini", "bedrock")

# Named fault forms each kind can answer (error_script entries, [[sim:fault:NAME]] triggers, spend forms).
# "ok" = process the request normally.
COMMON_FORMS = ("ok", "overloaded", "rate_limit", "server_error", "unavailable")
KIND_FORMS: dict[str, tuple[str, ...]] = {
    "openai": COMMON_FORMS + ("insufficient_quota",),
    "azure_openai": COMMON_FORMS + ("input_filter", "output_filter"),
    "anthropic": COMMON_FORMS + ("spend_429", "spend_400", "spend_402", "refusal"),
    "gemini": COMMON_FORMS + ("per_day", "per_minute", "blocked"),
    "bedrock": COMMON_FORMS + ("model_not_ready", "model_timeout", "quota"),
}
# spend_form values -> the form answered once spend_exhausted_after requests have been served
SPEND_FORMS: dict[str, dict[str, str]] = {
    "anthropic": {"429": "spend_429", "400": "spend_400", "402": "spend_402"},
    "openai": {"insufficient_quota": "insufficient_quota"},
}
DEFAULT_SPEND_FORM = {"anthropic": "429", "openai": "insufficient_quota"}

# api-version values the simulated Azure resource accepts when the config names none (published GA and
# preview versions of the data-plane inference API, https://learn.microsoft.com/azure/ai-services/openai/
# reference); a request with any other value, or none, gets Azure's 404 "Resource not found".
DEFAULT_AZURE_API_VERSIONS = (
    "2024-02-01", "2024-06-01", "2024-10-21", "2024-02-15-preview", "2024-08-01-preview",
    "2024-10-01-preview", "2024-12-01-preview", "2025-01-01-preview", "2025-03-01-preview",
    "2025-04-01-preview",
)  # fmt: skip

KIND_KEYS: dict[str, set[str]] = {
    "openai": {"spend_exhausted_after", "spend_form"},
    "azure_openai": {"deployment", "api_version", "window_seconds"},
    "anthropic": {"itpm", "otpm", "cache_write_ratio", "spend_exhausted_after", "spend_form"},
    "gemini": {"rpd", "day_seconds"},
    "bedrock": {"region", "aws_access_key_id"},
}
ALL_KIND_KEYS = set().union(*KIND_KEYS.values())
COMMON_KIND_KEYS = {"kind", "cache_read_ratio", "error_script", "overload"}


class ConfigError(ValueError):
    """The simulator configuration is invalid; the message names the offending field."""


@dataclass(frozen=True)
class WindowConfig:
    """A repeating window: ``duration_s`` out of every ``period_s``, shifted by ``offset_s``."""

    period_s: float
    duration_s: float
    offset_s: float = 0.0


@dataclass(frozen=True)
class KindConfig:
    """What one kind of provider adds to the common options (defaults: none of it)."""

    kind: str = "openai"
    itpm: float | None = None  # anthropic: input tokens / minute, cache reads excluded
    otpm: float | None = None  # anthropic: output tokens / minute (max_tokens reserved, actual kept)
    deployment: str | None = None  # azure: the one deployment name served (default: the model)
    api_versions: tuple[str, ...] = ()  # azure: accepted api-version values
    window_seconds: float | None = None  # azure: the rpm bucket holds this many seconds (1-10; tpm: a minute)
    rpd: int | None = None  # gemini: requests per (simulated) day
    day_seconds: float = 86400.0  # gemini: the simulated day's length
    region: str | None = None  # bedrock: the region requests must be signed for (None: any)
    aws_access_key_id: str | None = None  # bedrock: the access key id they must name (None: any)
    cache_read_ratio: float = 0.0  # fraction of prompt tokens reported as cache reads
    cache_write_ratio: float = 0.0  # anthropic: fraction reported as cache writes
    error_script: tuple[str, ...] = ()  # named forms for the first N requests, then normal behaviour
    overload: WindowConfig | None = None  # inside the window: the kind's overloaded form
    spend_exhausted_after: int | None = None  # after N requests served: the spend form, for good
    spend_form: str | None = None  # anthropic "429" | "400" | "402"; openai "insufficient_quota"

    @property
    def spend_form_name(self) -> str | None:
        """The form answered once spending is exhausted (None: never)."""
        if self.spend_exhausted_after is None or self.spend_form is None:
            return None
        return SPEND_FORMS[self.kind][self.spend_form]


def number(d: dict, key: str, where: str, default=None, *, minimum=None, maximum=None, integer=False):
    """``d[key]`` as a finite number within bounds (``default`` when absent or null)."""
    if key not in d or d[key] is None:
        return default
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}.{key}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{where}.{key}: must be finite")
    if integer and int(value) != value:
        raise ConfigError(f"{where}.{key}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where}.{key}: must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{where}.{key}: must be <= {maximum}, got {value!r}")
    return int(value) if integer else float(value)


def window(raw: Any, where: str) -> WindowConfig | None:
    """A {period_s, duration_s, offset_s?} object (None when absent)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object with period_s, duration_s")
    unknown = set(raw) - {"period_s", "duration_s", "offset_s"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    period = number(raw, "period_s", where, minimum=0.001)
    duration = number(raw, "duration_s", where, minimum=0.0)
    if period is None or duration is None:
        raise ConfigError(f"{where}: period_s and duration_s are required")
    if duration > period:
        raise ConfigError(f"{where}.duration_s: must be <= period_s")
    return WindowConfig(period, duration, number(raw, "offset_s", where, 0.0, minimum=0))


def _forms(raw: Any, kind: str, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of form names")
    allowed = KIND_FORMS[kind]
    for i, name in enumerate(raw):
        if name not in allowed:
            raise ConfigError(f"{where}[{i}]: {name!r} is not a form of kind {kind} (one of {list(allowed)})")
    return tuple(raw)


def _api_versions(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_AZURE_API_VERSIONS
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        raise ConfigError(f"{where}.api_version: expected a non-empty string or list of strings")
    return tuple(values)


def _spend(raw: dict, kind: str, where: str) -> tuple[int | None, str | None]:
    after = number(raw, "spend_exhausted_after", where, None, minimum=0, integer=True)
    form = raw.get("spend_form")
    if form is not None and after is None:
        raise ConfigError(f"{where}.spend_form: needs spend_exhausted_after")
    if after is None:
        return None, None
    form = DEFAULT_SPEND_FORM[kind] if form is None else form
    if form not in SPEND_FORMS[kind]:
        raise ConfigError(f"{where}.spend_form: {form!r} is not a spend form of kind {kind} "
                          f"(one of {list(SPEND_FORMS[kind])})")  # fmt: skip
    return after, form


def parse_kind(raw: dict, where: str) -> KindConfig:
    """The kind-specific options of one provider; a key another kind owns is refused, naming it."""
    kind = raw.get("kind", "openai")
    if kind not in KINDS:
        raise ConfigError(f"{where}.kind: {kind!r} is not one of {list(KINDS)}")
    foreign = sorted((set(raw) & ALL_KIND_KEYS) - KIND_KEYS[kind])
    if foreign:
        raise ConfigError(f"{where}.{foreign[0]}: not an option of kind {kind}")
    if kind == "azure_openai" and "burst_seconds" in raw:
        raise ConfigError(f"{where}.burst_seconds: kind azure_openai limits over short windows; "
                          f"use window_seconds (1-10)")  # fmt: skip
    deployment = raw.get("deployment")
    if deployment is not None and (not isinstance(deployment, str) or not deployment):
        raise ConfigError(f"{where}.deployment: expected a non-empty string")
    read = number(raw, "cache_read_ratio", where, 0.0, minimum=0, maximum=1)
    write = number(raw, "cache_write_ratio", where, 0.0, minimum=0, maximum=1)
    if read + write > 1:
        raise ConfigError(f"{where}.cache_write_ratio: cache_read_ratio + cache_write_ratio must be <= 1")
    if "error_script" in raw and "status_script" in raw:
        raise ConfigError(f"{where}.error_script: give error_script or status_script, not both")
    after, spend_form = _spend(raw, kind, where) if kind in SPEND_FORMS else (None, None)
    azure = kind == "azure_openai"
    return KindConfig(
        kind=kind,
        itpm=number(raw, "itpm", where, None, minimum=0) or None,
        otpm=number(raw, "otpm", where, None, minimum=0) or None,
        deployment=deployment,
        api_versions=_api_versions(raw.get("api_version"), where) if azure else (),
        window_seconds=number(raw, "window_seconds", where, 10.0, minimum=1, maximum=10) if azure else None,
        rpd=number(raw, "rpd", where, None, minimum=0, integer=True) or None,
        day_seconds=number(raw, "day_seconds", where, 86400.0, minimum=0.001),
        cache_read_ratio=read,
        cache_write_ratio=write,
        error_script=_forms(raw.get("error_script"), kind, f"{where}.error_script"),
        overload=window(raw.get("overload"), f"{where}.overload"),
        spend_exhausted_after=after,
        spend_form=spend_form,
        region=_text(raw, "region", where),
        aws_access_key_id=_text(raw, "aws_access_key_id", where),
    )


def _text(raw: dict, key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{where}.{key}: expected a non-empty string")
    return value
