"""What an item waits for between two attempts, holding nothing meanwhile (docs/engine.md, "Failure
isolation"): a backoff or Retry-After before the same provider again (``retry_delay``), or every
candidate's breaker open (``breaker_wait``; an open breaker's cooldown replaces the backoff).
``ItemLife`` (attempts.py) returns a ``Wait``; the provider queues park the item while it lasts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .backoff import BACKOFF_POLICIES
from .breaker import HALF_OPEN, Permit
from .context import RunContext
from .error_kinds import error_kind
from .outcomes import HttpOutcome
from .recording import Failure, breaker_gave_up
from .routing import ProviderConfig

if TYPE_CHECKING:  # attempts.py imports this module
    from .attempts import ItemState

HALF_OPEN_POLL_SECONDS = 0.5  # a refused half-open breaker is asked again this often (its probe is out)
FAILED_PROBE_DEFER_SECONDS = 0.25  # an item of the last probe's batch, or one that failed there, waits longer


@dataclass(frozen=True)
class Wait:
    """The item has to wait before its next step: a backoff / Retry-After, or (``breaker``) every
    candidate's breaker is open. It holds nothing meanwhile (slot, lease, grant all given back)."""

    seconds: float
    breaker: bool = False
    provider: str = ""  # a backoff's provider: its pause (set in any process) ends the wait
    # a breaker wait of an item that never failed at the candidate: a probe closing it here ends it
    close_of: str = ""


def breaker_wait(
    ctx: RunContext, state: ItemState, remaining: list[ProviderConfig], refusals: list[Permit]
) -> Wait | None:
    """Every candidate's breaker is open: wait for the first probe, or give up (None: the failure is
    recorded on the item's result) once the item has waited ``max_breaker_wait_seconds`` in all.
    Probes go round the batches: an item of the batch that had the latest probe, or one that already
    failed at one of them, asks a moment later
    (FAILED_PROBE_DEFER_SECONDS), so another batch's item takes the probe when one waits for it. A
    half-open breaker (its probe is out) is asked again every HALF_OPEN_POLL_SECONDS: the probe's
    answer closes it in milliseconds."""
    limit = ctx.options.max_breaker_wait_seconds
    if state.breaker_waited >= limit:
        breaker_gave_up(state.result, remaining, state.breaker_waited, limit)
        return None
    wait = min(
        (min(r.wait_seconds, HALF_OPEN_POLL_SECONDS) if r.state == HALF_OPEN else r.wait_seconds)
        for r in refusals
    )
    batch = state.item.batch_id
    failed_there = any(state.per_provider.get(p.name) for p in remaining)
    # the last probe's batch yields the next probe to another batch — but not while that probe is out
    # (half-open): if it comes back healthy, its batch's items are the likeliest to succeed
    if failed_there or (batch and any(r.last_prober == batch and r.state != HALF_OPEN for r in refusals)):
        wait += FAILED_PROBE_DEFER_SECONDS
    wait = max(0.05, wait) + ctx.rng.uniform(0, 0.05)
    close_of = remaining[0].name if len(remaining) == 1 and not failed_there else ""
    return Wait(min(wait, limit - state.breaker_waited), breaker=True, close_of=close_of)


def retry_delay(
    ctx: RunContext, state: ItemState, choice: ProviderConfig, outcome: HttpOutcome, failure: Failure
) -> float:
    """The wait before the same provider again after a retried failure: none after a pause (the next
    candidate, at once) or, for a policy that ``yields_to_breaker`` (a provider-wide overload), when the
    provider's breaker is open (its cooldown is the wait: the next pass falls back, or waits for the
    breaker's probe — never a backoff on top; docs/engine.md "Retries and backoff"), the believable
    Retry-After, else full jitter under the error type's backoff policy (its row's ``backoff``,
    gateway_engine/error_kinds.py)."""
    policy = error_kind(outcome.error_type).backoff
    if outcome.pause is not None or (failure.breaker_open and BACKOFF_POLICIES[policy].yields_to_breaker):
        return 0.0
    if failure.retry_after is not None:
        return failure.retry_after
    retries = state.per_provider[choice.name] - 1
    return ctx.options.retry.backoff(retries, ctx.rng, policy=policy)
