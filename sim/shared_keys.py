"""Shared keys: one set of limits (RPM, TPM) spent by several simulated providers and by an outside
client the simulator drives itself (sim/outside.py) — a key the gateway does not have to itself.

Config (simulated units, like every rate in the file)::

    "shared_keys": {
        "team-key": {"rpm": 600, "tpm": 200000, "burst_seconds": 5,
                     "outside": {"rps": 5, "duration_s": 60, "start_s": 0, "tokens": 100}}
    },
    "providers": {"alpha": {"shared_key": "team-key", ...}, "beta": {"shared_key": "team-key", ...}}

A provider naming ``shared_key`` takes its RPM / TPM buckets from the key (it may not set ``rpm`` /
``tpm`` itself); its answers carry the key's remaining / reset in the kind's headers (sim/kinds.py), so
the outside client's spending shows there. ``outside.rps``: requests per simulated second
(``tokens`` each, prompt + max_tokens), for ``duration_s`` simulated seconds (absent: for as long as the
simulator runs) from ``start_s``. A reset (``POST /_sim/reset``) refills the key and restarts its
outside client. ``GET /_sim/counters`` → ``shared_keys``: per key the outside client's sent / ok /
429 counts and the key's remaining requests and tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.kind_config import ConfigError
from sim.kind_config import number as _num


@dataclass(frozen=True)
class OutsideConfig:
    rps: float  # requests per simulated second
    tokens: int = 100  # TPM charge of each outside request
    duration_s: float | None = None  # simulated seconds; None: as long as the simulator runs
    start_s: float = 0.0


@dataclass(frozen=True)
class SharedKeyConfig:
    name: str
    rpm: float | None
    tpm: float | None
    burst_seconds: float = 5.0
    outside: OutsideConfig | None = None


def parse_outside(raw, where: str) -> OutsideConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object {{rps, duration_s?, start_s?, tokens?}}")
    unknown = set(raw) - {"rps", "duration_s", "start_s", "tokens"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    rps = _num(raw, "rps", where, None, minimum=0.001, maximum=1_000_000)
    if rps is None:
        raise ConfigError(f"{where}.rps: required")
    return OutsideConfig(
        rps=rps,
        tokens=_num(raw, "tokens", where, 100, minimum=0, maximum=10_000_000, integer=True),
        duration_s=_num(raw, "duration_s", where, None, minimum=0.001),
        start_s=_num(raw, "start_s", where, 0.0, minimum=0),
    )


def parse_shared_keys(raw) -> dict[str, SharedKeyConfig]:
    """The ``shared_keys`` object of a config (absent: none)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("shared_keys: expected an object {name: {rpm, tpm, burst_seconds?, outside?}}")
    keys = {}
    for name, spec in raw.items():
        where = f"shared_keys.{name}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected an object")
        unknown = set(spec) - {"rpm", "tpm", "burst_seconds", "outside", "comment"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
        rpm, tpm = _num(spec, "rpm", where, None, minimum=0), _num(spec, "tpm", where, None, minimum=0)
        if not rpm and not tpm:
            raise ConfigError(f"{where}: give rpm and/or tpm (the limits the key's users share)")
        keys[name] = SharedKeyConfig(
            name=name,
            rpm=rpm or None,
            tpm=tpm or None,
            burst_seconds=_num(spec, "burst_seconds", where, 5.0, minimum=0.001),
            outside=parse_outside(spec.get("outside"), f"{where}.outside"),
        )
    return keys


def check_users(keys: dict[str, SharedKeyConfig], providers: dict[str, dict]) -> None:
    """Each provider's ``shared_key`` names a key, and such a provider sets no rpm / tpm of its own."""
    for name, raw in providers.items():
        key = raw.get("shared_key") if isinstance(raw, dict) else None
        if key is None:
            continue
        where = f"providers.{name}.shared_key"
        if not isinstance(key, str) or key not in keys:
            raise ConfigError(f"{where}: unknown shared key {key!r} (known: {sorted(keys)})")
        given = sorted(k for k in ("rpm", "tpm") if raw.get(k))
        if given:
            raise ConfigError(f"providers.{name}: {given} come from shared key {key!r}; remove them here")


class SharedKeys:
    """The running shared keys: one ``sim.limits.Limits`` per key, handed to the providers that use it,
    and its outside client (sim/outside.py)."""

    def __init__(self, keys: dict[str, SharedKeyConfig], time_scale: float, now: float):
        from sim.config import ProviderConfig  # the buckets are built like a provider's
        from sim.limits import Limits
        from sim.outside import OutsideClient

        self.keys = keys
        self.limits = {
            name: Limits(ProviderConfig(name=name, rpm=k.rpm, tpm=k.tpm, burst_seconds=k.burst_seconds),
                         time_scale, now)
            for name, k in keys.items()
        }  # fmt: skip
        self.outside = {
            name: OutsideClient(k.outside, self.limits[name], time_scale)
            for name, k in keys.items()
            if k.outside is not None
        }

    def attach(self, providers: dict) -> None:
        """Give every provider that names a shared key that key's buckets."""
        for p in providers.values():
            if p.cfg.shared_key is not None:
                p.limits = self.limits[p.cfg.shared_key]

    def start(self) -> None:
        for client in self.outside.values():
            client.start()

    def stop(self) -> None:
        for client in self.outside.values():
            client.stop()

    def snapshot(self, now: float) -> dict:
        out = {}
        for name, limits in self.limits.items():
            state = limits.state(now)
            client = self.outside.get(name)
            out[name] = {
                "remaining_requests": state["requests"][1] if "requests" in state else None,
                "remaining_tokens": state["tokens"][1] if "tokens" in state else None,
                **(client.counts() if client is not None else {"outside_sent": 0, "outside_ok": 0,
                                                                 "outside_429": 0}),
            }  # fmt: skip
        return out
