"""Simulator configuration: one JSON document describing several named providers.

All durations and rates in the file are in *simulated* units. ``time_scale`` compresses time: with
``time_scale = 10`` a simulated minute lasts 6 real seconds, so an ``rpm`` of 60 admits 600 requests
per real minute, a 2 s median latency takes 0.2 s, and a 60 s outage period repeats every 6 s.
Bucket capacities (``rate x burst_seconds``) are the same in both units.

A provider's ``kind`` (openai | azure_openai | anthropic | gemini) picks its routes, request validation,
answers, headers, limits and fault forms; the kind-specific options are parsed in sim/kind_config.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sim.batch_config import BATCH_KEYS, BatchConfig, parse_batch
from sim.kind_config import ALL_KIND_KEYS, COMMON_KIND_KEYS, ConfigError, KindConfig, parse_kind, window
from sim.kind_config import WindowConfig as OutageConfig
from sim.kind_config import number as _num
from sim.prompt_cache import KEYS as PROMPT_CACHE_KEYS
from sim.prompt_cache import PromptCacheConfig, check_config, parse_prompt_cache
from sim.shared_keys import SharedKeyConfig, check_users, parse_shared_keys

__all__ = ["ConfigError", "OutageConfig", "ProviderConfig", "SimConfig", "load_config", "parse_config"]

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class CompletionConfig:
    """Completion length drawn from a lognormal (median, sigma), capped at the request's max_tokens."""

    median: float
    sigma: float = 0.0
    minimum: int = 1


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    model: str = ""
    rpm: float | None = None  # None / 0 = unlimited
    tpm: float | None = None
    burst_seconds: float = 5.0
    median_ms: float = 200.0
    sigma: float = 0.0
    min_ms: float = 0.0
    max_ms: float | None = None
    max_concurrency: int | None = None  # None / 0 = unlimited; over it -> 503
    error_rate_500: float = 0.0  # 500 returned AFTER processing (billed)
    hang_rate: float = 0.0  # request is accepted and never answered within hang_seconds
    hang_seconds: float = 600.0  # REAL seconds (not scaled): must exceed any client timeout
    outage: OutageConfig | None = None
    fixed_status: int | None = None  # every request answered with this status (not billed)
    status_script: tuple[int, ...] = ()  # statuses for the first N requests, then normal behaviour
    default_max_tokens: int = 64  # used when the request gives no max_tokens
    completion: CompletionConfig | None = None  # None: completion tokens = max_tokens
    api_key: str | None = None  # when set, requests must carry the key the kind's way
    seed: int | None = None
    native: KindConfig = field(default_factory=KindConfig)  # kind and kind-specific options
    # streamed answers (sim/streaming.py): the text split in this many content chunks, this long between
    # them (simulated ms), and a mid-stream fault after N content chunks (an error event, or a cut)
    stream_chunks: int = 4
    chunk_delay_ms: float = 0.0
    stream_error_after: int | None = None
    stream_cut_after: int | None = None
    shared_key: str | None = None  # RPM / TPM from this shared key (sim/shared_keys.py)
    # the provider's prompt cache (sim/prompt_cache.py); fixed cache_read_ratio / cache_write_ratio win
    prompt_cache: PromptCacheConfig = field(default_factory=PromptCacheConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)  # its batch API (sim/batch_config.py)

    @property
    def kind(self) -> str:
        return self.native.kind


@dataclass(frozen=True)
class SimConfig:
    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    time_scale: float = 1.0
    seed: int | None = None
    # When set, every request is recorded in GET /_sim/trace with a tag: the first group of this regex
    # matched against the last message's content (benchmarks tag each user request this way).
    trace_tag_regex: str | None = None
    shared_keys: dict[str, SharedKeyConfig] = field(default_factory=dict)  # sim/shared_keys.py

    @property
    def minute_s(self) -> float:
        """Real seconds in one simulated minute."""
        return 60.0 / self.time_scale


def _status(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 599:
        raise ConfigError(f"{where}: expected an HTTP status code (100-599), got {value!r}")
    return value


_PROVIDER_KEYS = {
    "name", "model", "rpm", "tpm", "burst_seconds", "median_ms", "sigma", "min_ms", "max_ms",
    "max_concurrency", "error_rate_500", "hang_rate", "hang_seconds", "outage", "fixed_status",
    "status_script", "default_max_tokens", "completion_tokens", "api_key", "seed", "comment",
    "stream_chunks", "chunk_delay_ms", "stream_error_after", "stream_cut_after", "shared_key",
} | COMMON_KIND_KEYS | ALL_KIND_KEYS | PROMPT_CACHE_KEYS | BATCH_KEYS  # fmt: skip


def parse_completion(value: Any, where: str) -> CompletionConfig | None:
    """``completion_tokens``: a fixed count, or ``{median, sigma, min}`` of a lognormal; None: absent."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ConfigError(f"{where}: must be >= 1")
        return CompletionConfig(median=float(value), sigma=0.0)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected an integer or {{median, sigma}}")
    median = _num(value, "median", where, minimum=1)
    if median is None:
        raise ConfigError(f"{where}.median: required")
    return CompletionConfig(
        median=median,
        sigma=_num(value, "sigma", where, 0.0, minimum=0, maximum=5),
        minimum=_num(value, "min", where, 1, minimum=1, integer=True),
    )


def parse_stream_faults(raw: dict, where: str) -> tuple[int | None, int | None]:
    """(``stream_error_after``, ``stream_cut_after``): at most one of the two mid-stream faults."""
    error_after = _num(raw, "stream_error_after", where, None, minimum=0, integer=True)
    cut_after = _num(raw, "stream_cut_after", where, None, minimum=0, integer=True)
    if error_after is not None and cut_after is not None:
        raise ConfigError(f"{where}.stream_cut_after: give stream_error_after or stream_cut_after, not both")
    return error_after, cut_after


def parse_provider(name: str, raw: dict) -> ProviderConfig:
    where = f"providers.{name}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object")
    if not NAME_RE.match(name) or name.startswith("_"):
        raise ConfigError(f"{where}: invalid provider name {name!r} (letters, digits, _ . -)")
    unknown = set(raw) - _PROVIDER_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    native = parse_kind(raw, where)
    check_config(raw, where)
    if native.kind == "azure_openai" and native.deployment is None:
        native = replace(native, deployment=raw.get("model", f"{name}-chat"))
    outage = window(raw.get("outage"), f"{where}.outage")
    completion = parse_completion(raw.get("completion_tokens"), f"{where}.completion_tokens")
    script = raw.get("status_script") or []
    if not isinstance(script, list):
        raise ConfigError(f"{where}.status_script: expected a list of status codes")
    fixed = raw.get("fixed_status")
    api_key = raw.get("api_key")
    if api_key is not None and not isinstance(api_key, str):
        raise ConfigError(f"{where}.api_key: expected a string")
    model = raw.get("model", f"{name}-chat")
    if not isinstance(model, str):
        raise ConfigError(f"{where}.model: expected a string")
    rpm = _num(raw, "rpm", where, None, minimum=0)
    tpm = _num(raw, "tpm", where, None, minimum=0)
    conc = _num(raw, "max_concurrency", where, None, minimum=0, integer=True)
    error_after, cut_after = parse_stream_faults(raw, where)
    return ProviderConfig(
        name=name,
        model=model,
        rpm=rpm or None,
        tpm=tpm or None,
        # azure_openai limits requests over short windows: its rpm bucket holds window_seconds (tpm: a minute)
        burst_seconds=native.window_seconds or _num(raw, "burst_seconds", where, 5.0, minimum=0.001),
        median_ms=_num(raw, "median_ms", where, 200.0, minimum=0),
        sigma=_num(raw, "sigma", where, 0.0, minimum=0, maximum=5),
        min_ms=_num(raw, "min_ms", where, 0.0, minimum=0),
        max_ms=_num(raw, "max_ms", where, None, minimum=0),
        max_concurrency=conc or None,
        error_rate_500=_num(raw, "error_rate_500", where, 0.0, minimum=0, maximum=1),
        hang_rate=_num(raw, "hang_rate", where, 0.0, minimum=0, maximum=1),
        hang_seconds=_num(raw, "hang_seconds", where, 600.0, minimum=0.001),
        outage=outage,
        fixed_status=None if fixed is None else _status(fixed, f"{where}.fixed_status"),
        status_script=tuple(_status(s, f"{where}.status_script[{i}]") for i, s in enumerate(script)),
        default_max_tokens=_num(raw, "default_max_tokens", where, 64, minimum=1, integer=True),
        completion=completion,
        api_key=api_key or None,
        seed=_num(raw, "seed", where, None, integer=True),
        native=native,
        stream_chunks=_num(raw, "stream_chunks", where, 4, minimum=1, maximum=10_000, integer=True),
        chunk_delay_ms=_num(raw, "chunk_delay_ms", where, 0.0, minimum=0),
        stream_error_after=error_after,
        stream_cut_after=cut_after,
        shared_key=raw.get("shared_key"),
        prompt_cache=parse_prompt_cache(raw, where),
        batch=parse_batch(raw, native.kind, where, native.deployment),
    )


def parse_config(raw: dict) -> SimConfig:
    """Validate a config dict: {"time_scale": 1, "seed": 1, "providers": {name: {...}} or [{name,...}]}."""
    if not isinstance(raw, dict):
        raise ConfigError("config: expected a JSON object")
    unknown = set(raw) - {"providers", "time_scale", "seed", "comment", "trace_tag_regex", "shared_keys"}
    if unknown:
        raise ConfigError(f"config: unknown keys {sorted(unknown)}")
    provs = raw.get("providers")
    if isinstance(provs, list):
        items = []
        for i, p in enumerate(provs):
            if not isinstance(p, dict) or not isinstance(p.get("name"), str):
                raise ConfigError(f"providers[{i}].name: required string")
            items.append((p["name"], {k: v for k, v in p.items() if k != "name"}))
        names = [n for n, _ in items]
        if len(set(names)) != len(names):
            raise ConfigError("providers: duplicate names")
    elif isinstance(provs, dict):
        items = list(provs.items())
    else:
        raise ConfigError("providers: expected an object {name: {...}} or a list of {name, ...}")
    if not items:
        raise ConfigError("providers: at least one provider is required")
    time_scale = _num(raw, "time_scale", "config", 1.0, minimum=0.001, maximum=100_000)
    tag_re = raw.get("trace_tag_regex")
    if tag_re is not None:
        try:
            if not isinstance(tag_re, str) or re.compile(tag_re).groups < 1:
                raise ConfigError("config.trace_tag_regex: expected a regex with one group")
        except re.error as exc:
            raise ConfigError(f"config.trace_tag_regex: invalid regex: {exc}") from exc
    shared_keys = parse_shared_keys(raw.get("shared_keys"))
    check_users(shared_keys, dict(items))
    return SimConfig(
        shared_keys=shared_keys,
        providers={name: parse_provider(name, p) for name, p in items},
        time_scale=time_scale,
        seed=_num(raw, "seed", "config", None, integer=True),
        trace_tag_regex=tag_re,
    )


def load_config(source: str | Path | dict) -> SimConfig:
    """A SimConfig from a dict, a JSON file path, or a JSON string."""
    if isinstance(source, SimConfig):
        return source
    if isinstance(source, dict):
        return parse_config(source)
    text = str(source)
    if text.lstrip().startswith("{"):
        data = json.loads(text)
    else:
        path = Path(text)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: invalid JSON: {exc}") from exc
    return parse_config(data)
