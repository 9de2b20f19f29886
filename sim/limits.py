"""A simulated provider's limits: token buckets for RPM, TPM, ITPM, OTPM and a per-day request count.

Charges, per admitted request (the numbers a client can predict, sim/tokens.py):
- RPM: 1 request; TPM: prompt + max_tokens (OpenAI's and Azure's rule: the whole max_tokens is counted);
- ITPM (Anthropic): the *uncached* input, i.e. prompt tokens minus cache reads (cache writes count) — the
  published rule that cache reads do not count toward ITPM;
- OTPM (Anthropic): max_tokens at admission, then the unused part (max_tokens - actual output) is given
  back when the answer is known ("estimated from max_tokens, adjusted at the end of the request");
- RPD (Gemini): 1 request in the current simulated day (``day_seconds`` long, counted from start/reset).

A request is admitted only when every bucket can take its charge (then all are charged at once); else
nothing is charged and ``check`` names the first short limit and the real seconds until it can pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.buckets import Bucket
from sim.config import ProviderConfig


@dataclass(frozen=True)
class Charge:
    requests: int
    tokens: int  # TPM: prompt + max_tokens
    input_tokens: int  # ITPM: uncached prompt tokens
    output_tokens: int  # OTPM: max_tokens


@dataclass(frozen=True)
class Shortfall:
    """Why a request was turned away: the limit (requests | tokens | input_tokens | output_tokens |
    per_day) and the real seconds until it would pass (math.inf: never, the request is too large)."""

    limit: str
    wait: float


class Limits:
    """The buckets of one provider, built from its config (rates in real units: x time_scale)."""

    def __init__(self, cfg: ProviderConfig, time_scale: float, now: float):
        self.cfg = cfg
        self.time_scale = time_scale
        self.epoch = now
        burst = cfg.burst_seconds
        native = cfg.native

        def bucket(per_minute: float | None, minimum: float = 0.0, seconds: float = burst) -> Bucket | None:
            if not per_minute:
                return None
            return Bucket(per_minute * time_scale / 60.0, max(minimum, per_minute / 60.0 * seconds), now)

        # Azure (docs/sim.md "Kinds"): requests are limited over its short window (window_seconds, the
        # provider's burst_seconds), tokens per minute, and its x-ratelimit-remaining-tokens is read as
        # what is left for the next (real) minute: the token bucket holds a real minute of the limit
        token_seconds = 60.0 * time_scale if native.window_seconds else burst

        # name -> (bucket, limit per simulated minute); the order is the order limits are reported in
        self.buckets: dict[str, tuple[Bucket, float]] = {}
        for name, rate, minimum, seconds in (
            ("requests", cfg.rpm, 1.0, burst),
            ("tokens", cfg.tpm, 0.0, token_seconds),
            ("input_tokens", native.itpm, 0.0, burst),
            ("output_tokens", native.otpm, 0.0, burst),
        ):
            b = bucket(rate, minimum, seconds)
            if b is not None:
                self.buckets[name] = (b, rate)  # fmt: skip
        self.day_real = native.day_seconds / time_scale
        self.day_index = 0
        self.day_count = 0

    @staticmethod
    def amounts(charge: Charge) -> dict[str, int]:
        return {"requests": charge.requests, "tokens": charge.tokens, "input_tokens": charge.input_tokens,
                "output_tokens": charge.output_tokens}  # fmt: skip

    def _roll_day(self, now: float) -> None:
        index = int((now - self.epoch) // self.day_real)
        if index != self.day_index:
            self.day_index, self.day_count = index, 0

    def day_reset_after(self, now: float) -> float:
        """Real seconds until the simulated day ends (Gemini's per-day quota resets)."""
        return self.day_real * (self.day_index + 1) - (now - self.epoch)

    def check(self, charge: Charge, now: float) -> Shortfall | None:
        """The first limit that cannot take ``charge`` now (None: every one can)."""
        rpd = self.cfg.native.rpd
        if rpd:
            self._roll_day(now)
            if self.day_count >= rpd:
                return Shortfall("per_day", self.day_reset_after(now))
        amounts = self.amounts(charge)
        waits = [(b.wait_for(amounts[name], now), name) for name, (b, _) in self.buckets.items()]
        too_large = [name for wait, name in waits if wait == math.inf]
        if too_large:
            return Shortfall(too_large[0], math.inf)
        short = [(wait, name) for wait, name in waits if wait > 0]
        if not short:
            return None
        wait, name = max(short)
        return Shortfall(name, wait)

    def take(self, charge: Charge, now: float) -> None:
        amounts = self.amounts(charge)
        for name, (b, _) in self.buckets.items():
            b.take(amounts[name], now)
        if self.cfg.native.rpd:
            self.day_count += 1

    def give_back_output(self, unused: int, now: float) -> None:
        """OTPM: return the reserved output tokens the answer did not use."""
        entry = self.buckets.get("output_tokens")
        if entry is not None and unused > 0:
            b = entry[0]
            b.refill(now)
            b.level = min(b.capacity, b.level + unused)

    def state(self, now: float) -> dict[str, tuple[int, int, float]]:
        """name -> (limit per real minute, remaining now, real seconds until full) for each bucket."""
        out = {}
        for name, (b, rate) in self.buckets.items():
            b.refill(now)
            out[name] = (int(round(rate * self.time_scale)), max(0, int(b.level)), b.reset_after(now))
        return out
