"""What one attempt's answer means for its item: the attempt log entry, the result fields, the
breaker's health signal, a 429's pause of the bucket, a provider-wide pause (billing exhausted, a
per-day quota), and the settle of the grant to the reported usage. Also how an item ends after waiting
too long for open breakers, or when admission found its provider paused.

Three failure kinds that look alike on the wire and must not be confused (docs/engine.md "Failure
semantics"): a 429 ``rate_limited`` is this account's rate (the bucket is penalized by the believable
wait, every worker waits); ``overloaded`` is the provider's load across all its customers (a breaker
failure, full-jitter backoff, never a bucket penalty: our quota is fine); an answer carrying a
``Pause`` says the provider will refuse everyone for a long while (the store's provider pause, no
retry there, the item falls back at once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .admission import Admission, Admitted
from .breaker import OPEN
from .breaker_wakes import probe_succeeded
from .context import RunContext
from .error_kinds import BREAKER_FAILURES
from .items import AttemptEntry, ItemResult, WorkItem
from .outage import OutageRide
from .outcomes import HttpOutcome
from .quota.types import ProviderLimits, ProviderPaused
from .remaining import remaining_quota
from .retry import ErrorType, rate_limit_wait
from .routing import ProviderConfig

__all__ = [
    "BREAKER_FAILURES",
    "Failure",
    "OutcomeRecorder",
    "attempt_entry",
    "breaker_gave_up",
    "pause_error_type",
    "paused_at_admission",
]


class Failure(NamedTuple):
    """What a failed attempt leaves for the retry decision (attempts.py)."""

    retry_after: float | None  # the believable wait a ``rate_limited`` answer asked for
    breaker_open: bool  # this failure left (or found) the provider's breaker open


class OutcomeRecorder:
    """Records one run's attempts on their results and tells the breaker, the bucket and the observer."""

    def __init__(self, ctx: RunContext, admission: Admission, ride: OutageRide) -> None:
        self.ctx, self.admission, self.ride = ctx, admission, ride

    async def record(
        self,
        item: WorkItem,
        result: ItemResult,
        choice: ProviderConfig,
        admitted: Admitted,
        outcome: HttpOutcome,
        started: str,
    ) -> AttemptEntry:
        """Settle the bucket with the reported usage, log the attempt (already counted on ``result``) and
        tell the observer."""
        usage = outcome.usage
        if usage is not None:
            await self.settle(choice, admitted, outcome, usage)
        await self.follow(choice, admitted, outcome)
        entry = attempt_entry(choice.name, outcome, started)
        result.attempt_log.append(entry)
        self.ctx.observer.on_attempt(choice.name, error_type=outcome.error_type or "", status_code=outcome.status_code, latency_s=outcome.latency_ms / 1000.0, prompt_tokens=entry["prompt_tokens"], completion_tokens=entry["completion_tokens"], used=outcome.ok, custom_id=item.custom_id, attempt=result.attempts, team=item.team, endpoint=item.endpoint, batch_id=item.batch_id, cached_tokens=(usage or {}).get("cached_tokens", 0), cache_write_tokens=(usage or {}).get("cache_write_tokens", 0))  # fmt: skip
        result.provider, result.latency_ms = choice.name, outcome.latency_ms
        return entry

    async def settle(
        self, choice: ProviderConfig, admitted: Admitted, outcome: HttpOutcome, usage: Mapping[str, int]
    ) -> None:
        """The grant to the reported usage; a success's breaker signal in the same atomic script where
        the store can run it (one round trip: SETTLE), and then ``succeeded``'s record is answered
        from it (breaker_redis.py "Folded successes")."""
        breaker = self.ctx.breaker
        also = breaker.success_part(choice.name) if outcome.ok else None
        answer = await self.ride("reconcile", self.admission.settle, admitted, usage, also)
        if also is not None and answer is not None:
            breaker.learn_folded(choice.name, answer)

    async def follow(self, choice: ProviderConfig, admitted: Admitted, outcome: HttpOutcome) -> None:
        """Shared keys: an answer's remaining-quota headers adjust the provider's buckets for every worker
        (adaptive providers; docs/quota.md "Shared keys"). Every answer counts, 429s too."""
        reservation = admitted.reservation
        limits = reservation.current() if reservation.current is not None else admitted.request.limits
        if outcome.status_code is None or not outcome.headers or not limits.adaptive:
            return
        ceiling = self.ctx.options.retry.max_rate_limit_wait_seconds
        quota = remaining_quota(outcome.headers, choice.kind, limits, ceiling=ceiling)
        if not quota.empty:
            await self.ride("follow", self.ctx.store.follow_remaining, limits, reservation, quota)

    async def succeeded(
        self,
        result: ItemResult,
        choice: ProviderConfig,
        entry: AttemptEntry,
        outcome: HttpOutcome,
        probe: bool = False,
    ) -> None:
        await self.ride("breaker", self.ctx.breaker.record, choice.name, ok=True)
        if probe:  # the breaker is closed again: this process's never-failed waiters go first
            probe_succeeded(choice.name)
        entry["used"] = True
        result.status, result.response = "succeeded", outcome.body
        result.native_response = outcome.native
        result.error_type, result.error_status_code, result.error_message = "", None, ""
        usage = outcome.usage
        if usage is not None:
            result.prompt_tokens = usage["prompt_tokens"]
            result.completion_tokens = usage["completion_tokens"]
            result.total_tokens = usage["total_tokens"]
            result.cached_tokens = usage.get("cached_tokens")
            result.cache_write_tokens = usage.get("cache_write_tokens")

    async def failed(
        self,
        result: ItemResult,
        choice: ProviderConfig,
        probe: bool,
        limits: ProviderLimits,
        entry: AttemptEntry,
        outcome: HttpOutcome,
    ) -> Failure:
        """Record a failed attempt on the result, tell the breaker, (a 429) the bucket and (an answer
        with a pause) the store's provider pause. Returns the wait the answer asked for (Retry-After /
        x-ratelimit-reset-*), if believable: only a ``rate_limited`` answer's wait counts — an
        overloaded provider gets full-jitter backoff, a paused one is not retried at all — and whether
        the provider's breaker is open after it (then its cooldown is the wait, not the backoff)."""
        ctx = self.ctx
        result.retry_extra_tokens += entry["tokens"]
        result.error_type = outcome.error_type
        result.error_status_code = outcome.status_code
        result.error_message = outcome.message
        rate_limited = outcome.error_type == ErrorType.RATE_LIMITED and outcome.pause is None
        retry_after = (
            rate_limit_wait(outcome.headers, ceiling=ctx.options.retry.max_rate_limit_wait_seconds)
            if outcome.status_code and rate_limited
            else None
        )
        breaker_state = ""
        if outcome.error_type in BREAKER_FAILURES:
            breaker_state = await self.ride(
                "breaker", ctx.breaker.record, choice.name, ok=False, retry_after_seconds=retry_after
            )
        elif probe:  # the provider answered (429 or a 4xx): it is alive
            await self.ride("breaker", ctx.breaker.record, choice.name, ok=True)
            probe_succeeded(choice.name)
        if outcome.pause is not None:
            if not outcome.pause_applied:
                await self.pause(choice, outcome)
        elif outcome.status_code == 429 and rate_limited and retry_after:
            await self.ride("penalize", ctx.store.penalize, limits, retry_after)
        return Failure(retry_after, breaker_state == OPEN)

    async def pause_first(self, choice: ProviderConfig, outcome: HttpOutcome) -> None:
        """The pause an answer asks for, applied as soon as the answer is in — before its lease goes back
        (gateway_engine.sending) — so no item takes that lease and sends before the pause is visible."""
        await self.pause(choice, outcome)
        outcome.pause_applied = True

    async def pause(self, choice: ProviderConfig, outcome: HttpOutcome) -> None:
        """The answer says the provider refuses everyone for a while: pause it for every worker (through
        the outage ride like every store call) and tell the observer. Items admitted before the pause is
        visible may still send once each; nothing is granted after it (docs/engine.md)."""
        pause = outcome.pause
        assert pause is not None
        message = pause.message or outcome.message
        await self.ride(
            "pause", self.ctx.store.pause_provider, choice.name, pause.reason, pause.until_epoch, message
        )
        self.ctx.observer.on_provider_paused(choice.name, pause.reason, pause.until_epoch, message)


def attempt_entry(provider: str, outcome: HttpOutcome, started: str) -> AttemptEntry:
    """The attempt log entry of one HTTP attempt (see gateway_engine.stats)."""
    usage = outcome.usage
    entry: AttemptEntry = {
        "provider": provider,
        "status_code": outcome.status_code,
        "error_type": outcome.error_type,
        "latency_ms": outcome.latency_ms,
        "prompt_tokens": usage["prompt_tokens"] if usage else 0,
        "completion_tokens": usage["completion_tokens"] if usage else 0,
        "tokens": usage["total_tokens"] if usage else 0,
        "used": False,
        "at": started,
    }
    if usage and usage.get("cached_tokens") is not None:
        entry["cached_tokens"] = usage["cached_tokens"]
    if outcome.detail:  # staff only (admin/dashboard); teams see the sanitised message
        entry["detail"] = outcome.detail
    return entry


def breaker_gave_up(result: ItemResult, open_for: list[ProviderConfig], waited: float, limit: float) -> None:
    """End an item that waited ``waited`` seconds (measured) for an open breaker. Sent before: it keeps
    its last attempt's error type and status; never sent: ``no_provider``. The message says which
    breakers were open and how long the item really waited."""
    names = ", ".join(p.name for p in open_for)
    gave_up = f"circuit breaker open for {names}: waited {waited:.1f} s (limit {limit:g} s)"
    if result.attempts:
        result.error_message = f"{result.error_message}; not retried: {gave_up}"
    else:
        result.error_type, result.error_status_code = ErrorType.NO_PROVIDER, None
        result.error_message = f"never sent: {gave_up}" + (
            f"; {result.error_message}" if result.error_message else ""
        )


# a pause's reason → the error type an item ends with when that pause leaves it no candidate
_PAUSE_ERROR_TYPES = {"billing": ErrorType.PROVIDER_QUOTA_EXHAUSTED, "per_day_quota": ErrorType.RATE_LIMITED}


def pause_error_type(reason: str, until_epoch: float | None) -> str:
    """``provider_quota_exhausted`` for a billing pause, ``rate_limited`` for a per-day quota; a reason
    the table does not know is read from its end: none (until cleared) is billing-like."""
    known = _PAUSE_ERROR_TYPES.get(reason)
    if known is not None:
        return known
    return ErrorType.PROVIDER_QUOTA_EXHAUSTED if until_epoch is None else ErrorType.RATE_LIMITED


def paused_at_admission(result: ItemResult, exc: ProviderPaused) -> None:
    """Admission found the provider paused (by another worker's answer, or before): nothing was sent and
    no attempt is counted; if it was the item's last candidate the item ends with the pause's error."""
    result.error_type = pause_error_type(exc.reason, exc.until_epoch)
    result.error_status_code = None
    result.error_message = f"not sent: {exc}"
