"""What one grant asks of a provider's token buckets (TPM, and ITPM / OTPM where the provider sets them),
and what settling it to the reported usage moves in each: the arithmetic both backends share.

Providers like Anthropic limit input and output tokens per minute separately, beside RPM (and we keep
TPM for the providers that count the total). A caller reserves ``tokens`` (the prompt estimate plus
max_tokens) from TPM, the input part from ITPM and the output part from OTPM, in one atomic grant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .team_quota import TeamQuota
from .types import ProviderLimits, QuotaImpossible, Reservation


class AskHold(Protocol):
    """Something of this process taken just around each try of a grant (slots.LocalSlotHold)."""

    async def take(self) -> None:
        """Take it, waiting (holding nothing else) until it is free."""

    def give_back(self) -> None:
        """Give it back (the store refused); a no-op when not held."""


@dataclass(frozen=True)
class TokenAsk:
    """The amounts a caller asks for, as it gave them. ``input_tokens`` / ``output_tokens`` None: the
    caller did not split its estimate, so the whole of ``tokens`` is reserved from each configured
    ITPM / OTPM bucket — an upper bound, so the provider's limit still holds (reconcile refunds it)."""

    tokens: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    # an interactive caller in the fair queue: told to wait only for its team's share bucket, it is not
    # kept waiting in the store but gets TeamShareWait and gives its turn to other teams (fair_gate.py)
    step_aside: bool = False
    # store.admit: the provider's concurrency lease to take under this id with the grant (None: none)
    lease_id: str | None = None
    # store.admit: this process's in-flight slot, held only during each try (None: none)
    hold: AskHold | None = None

    def __post_init__(self) -> None:
        for name in ("tokens", "input_tokens", "output_tokens"):
            value = getattr(self, name)
            if value is not None and int(value) < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    def amounts(self, limits: ProviderLimits, team: TeamQuota | None = None) -> tuple[int, int, int]:
        """(TPM, ITPM, OTPM) tokens to take under ``limits`` (0 for a bucket the limits do not set).
        QuotaImpossible naming the bucket if one can never hold its amount (the team's TPM bucket too)."""
        n = int(self.tokens)
        ni = int(n if self.input_tokens is None else self.input_tokens) if limits.itpm else 0
        no = int(n if self.output_tokens is None else self.output_tokens) if limits.otpm else 0
        for amount, capacity, bucket in (
            (n, limits.tpm_capacity, "TPM"),
            (ni, limits.itpm_capacity, "ITPM"),
            (no, limits.otpm_capacity, "OTPM"),
        ):
            if amount > capacity:  # an unset bucket: amount 0, capacity 0
                raise QuotaImpossible(limits.name, amount, capacity, bucket)
        if team is not None and team.rate_limited and team.tpm is not None and n > team.tpm_rate[1]:
            raise QuotaImpossible(f"{limits.name} (team {team.team})", n, team.tpm_rate[1], "team TPM")
        return n, ni, no


def settle_deltas(
    limits: ProviderLimits,
    reservation: Reservation,
    actual_tokens: int,
    actual_input: int | None,
    actual_output: int | None,
) -> tuple[int, int, int]:
    """(TPM, ITPM, OTPM) tokens to take more (negative: refund) so each bucket is charged what the
    provider reported. An unreported part (None) or a bucket the limits do not set stays as reserved.
    Each debt is clamped to its bucket's capacity: an absurd ``usage`` (10^12 tokens) delays the
    provider by at most one bucket refill, never for good."""
    dt = min(int(actual_tokens) - int(reservation.tokens), int(limits.tpm_capacity))
    di = do = 0
    if actual_input is not None and limits.itpm:
        di = min(int(actual_input) - int(reservation.input_tokens), int(limits.itpm_capacity))
    if actual_output is not None and limits.otpm:
        do = min(int(actual_output) - int(reservation.output_tokens), int(limits.otpm_capacity))
    return dt, di, do


def team_delta(team: TeamQuota | None, reservation: Reservation, actual_tokens: int) -> int:
    """Tokens to take more (negative: refund) from the team's TPM bucket so it is charged what the
    provider reported, clamped to one bucket like the provider's (0: the team has no TPM limit)."""
    if team is None or not team.rate_limited or team.tpm is None:
        return 0
    return min(int(actual_tokens) - int(reservation.tokens), int(team.tpm_rate[1]))
