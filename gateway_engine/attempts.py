"""One item's life: attempts until it succeeds, fails for good or has to stop.

Per attempt: breaker permit for the chosen provider (open → next candidate, or wait for the half-open
probe, at most ``max_breaker_wait_seconds`` measured in all), the journal note, admission
(``admission.py``: budget, bucket token, lane, lease, in-flight slot), the send (one hard deadline =
the provider's ``timeout_seconds``; the lease goes back as soon as the answer is in), then what the
answer means (``outcomes.py``) and the retry/fallback decision: retried errors back off (full jitter,
or the believable Retry-After) before the same provider is tried again; a provider whose retries are
spent, whose bucket can never fit the item, or which is paused (its answer said billing exhausted or
a per-day quota, or admission found it paused: ``ProviderPaused``) is left for the next candidate — a
paused one at once, without a backoff. Every retry goes through all of it again. The final attempt's in-flight slot is held until ``on_result`` returned (the
caller persists the result there), so "sent but not recorded" never exceeds the cap.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field

from .admission import Admission, AdmissionRequest, Admitted, Stack
from .breaker import Permit
from .breaker_wakes import wait_for_close
from .context import RunContext
from .endpoints import EMBEDDINGS, WIRE_FAMILY
from .items import ItemResult, RetryState, WorkItem, item_estimate
from .kinds import embeddings_api
from .live_limits import LiveLimits
from .outage import OutageRide, is_store_failure
from .outcomes import HttpOutcome
from .quota.fair_gate import TeamWaitingLimit
from .quota.types import BudgetExceeded, Lane, ProviderLimits, ProviderPaused, QuotaImpossible
from .recording import OutcomeRecorder, paused_at_admission
from .retry import ErrorType, is_retryable_error
from .routing import ProviderConfig, RoutingError, candidates, stable_draw
from .sending import send_attempt
from .stopping import Stopping
from .waits import Wait, breaker_wait, retry_delay
from .wire.embeddings_check import no_embeddings

__all__ = ["Finished", "ItemLife", "ItemState", "OpenStream", "Wait"]

log = logging.getLogger(__name__)


def _engine_bug(item: WorkItem, exc: Exception) -> Finished:
    log.exception("engine bug while running item %s", item.custom_id, exc_info=exc)
    message = f"{type(exc).__name__}: {exc}"
    return Finished(
        ItemResult(item.custom_id, "failed", error_type=ErrorType.GATEWAY_ERROR, error_message=message)
    )


@dataclass(frozen=True)
class Finished:
    """An item's final result and its in-flight slot (None if nothing is held): the caller closes the
    slot once the result is stored. ``stream``: the item's answer is an open stream (the interactive
    lane's ``stream: true``): the result is not final yet, ``ItemLife.end_stream`` makes it so."""

    result: ItemResult
    slot: Stack | None = None
    stream: OpenStream | None = None


@dataclass(frozen=True)
class OpenStream:
    """An attempt whose answer is streaming: everything it holds (the grant, the lease in ``held``, the
    in-flight slot) stays held until ``ItemLife.end_stream``. ``outcome.stream`` reads it."""

    state: ItemState
    choice: ProviderConfig
    probe: bool
    admitted: Admitted
    outcome: HttpOutcome
    started: str


@dataclass
class ItemState:
    """One item's way through its attempts: where it may go and what it has done."""

    item: WorkItem
    result: ItemResult
    key: str  # the X-Request-ID header and the weighted draw's identity
    cands: list[ProviderConfig]
    est: int  # estimated tokens (the bucket reservation): est_input + est_output
    est_input: int = 0  # of which input (prompt characters / 4): the ITPM reservation
    est_output: int = 0  # of which output (max_tokens × n, else the default): the OTPM reservation
    per_provider: dict[str, int] = field(default_factory=dict)  # attempts per provider
    impossible: set[str] = field(default_factory=set)  # providers whose bucket can never fit the item
    paused: set[str] = field(default_factory=set)  # providers paused for everyone: never tried again
    stream: bool = False  # the answer is asked for as a stream (the interactive lane)
    last_provider: str = ""
    delay: float = 0.0  # backoff / Retry-After before retrying last_provider
    breaker_waited: float = 0.0  # seconds spent waiting for open breakers (measured)

    def usable(self, p: ProviderConfig) -> bool:
        if p.name in self.impossible or p.name in self.paused:
            return False
        return self.per_provider.get(p.name, 0) <= p.max_retries

    def remaining(self) -> list[ProviderConfig]:
        return [p for p in self.cands if self.usable(p)]


class ItemLife:
    """Runs items of one run, each from routing to its final result (``run``)."""

    def __init__(
        self,
        ctx: RunContext,
        admission: Admission,
        limits: LiveLimits,
        stopping: Stopping,
        ride: OutageRide,
        *,
        lane: Lane = "batch",
    ) -> None:
        self.ctx, self.admission, self.limits, self.stopping, self.ride = (
            ctx,
            admission,
            limits,
            stopping,
            ride,
        )
        self.lane = lane
        self.outcomes = OutcomeRecorder(ctx, admission, ride)

    async def run(self, item: WorkItem, *, stream: bool = False) -> Finished:
        """The item's final result and in-flight slot, its waits (backoff, breakers) slept in place. A
        quota-store/breaker outage that outlasted the ride-through propagates (the run fails); any
        other exception is an engine bug: logged, and the item ends ``gateway_error``."""
        state = self.begin(item, stream=stream)
        while not isinstance(state, Finished):
            step = await self.advance(state)
            if isinstance(step, Finished):
                return step
            await self.wait_out(state, step)
        return state

    def begin(self, item: WorkItem, *, stream: bool = False) -> ItemState | Finished:
        """The item's state before its first step (its failed result when it cannot be routed)."""
        try:
            state = item_state(self.ctx, item)
        except Exception as exc:  # noqa: BLE001 - an engine bug ends this item, not the run
            return _engine_bug(item, exc)
        if isinstance(state, ItemResult):
            return Finished(state)
        state.stream = stream
        return state

    async def advance(self, state: ItemState) -> Finished | Wait:
        """Steps (breaker → quota → send → decide) until the item has its final result or has to wait
        (a backoff or Retry-After, or every candidate's breaker open): the caller sleeps the ``Wait``
        out — in place (``run``) or parked, holding nothing (gateway_engine.queues)."""
        try:
            while True:
                step = await self._step(state)
                if step is not None:
                    return step
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            if is_store_failure(exc):
                raise
            return _engine_bug(state.item, exc)

    async def wait_out(self, state: ItemState, wait: Wait, *, parked: bool = False) -> Finished | None:
        """Sleep out ``wait`` (breaker waits are measured into the item's total). A ``parked`` item is
        given back (``released``, with what it spent in ``retry_state``) as soon as its run drains."""
        slept_from = self.ctx.clock()
        wake = None
        if wait.provider:
            wake = functools.partial(self.ctx.store.wait_for_pause, wait.provider)
        elif wait.close_of:
            wake = functools.partial(wait_for_close, wait.close_of)
        await self.stopping.sleep(wait.seconds, state.item, state.result, parked=parked, wake=wake)
        if wait.breaker:
            state.breaker_waited += self.ctx.clock() - slept_from
        if parked and self.stopping.draining and not self.stopping.stop_reason(state.item, state.result):
            return Finished(self._end(state, "released"))
        return None

    def _end(self, state: ItemState, reason: str) -> ItemResult:
        """The item stops without another send; one released after attempts carries what it spent."""
        result = self.stopping.end(state.result, reason)
        if reason == "released" and (state.per_provider or state.breaker_waited or state.item.carried):
            result.retry_state = RetryState(dict(state.per_provider), state.breaker_waited)
        return result

    async def _step(self, state: ItemState) -> Finished | Wait | None:
        """One pass: stop? backoff? breaker permit, then one attempt. None: go round again."""
        item, result = state.item, state.result
        reason = self.stopping.stop_reason(item, result)
        if reason:
            return Finished(self._end(state, reason))
        remaining = state.remaining()
        if not remaining:
            return Finished(result)  # the last failure is already recorded on the result
        if state.delay > 0 and remaining[0].name == state.last_provider:
            # backoff / Retry-After before retrying the same provider (ends early on the deadline, or
            # on a pause of that provider, from any process: the next pass finds it paused)
            wait, state.delay = Wait(state.delay, provider=state.last_provider), 0.0
            return wait
        state.delay = 0.0
        choice, probe, refusals = await self._permit(remaining, item.batch_id)
        if choice is None:
            waiting = breaker_wait(self.ctx, state, remaining, refusals)
            return waiting if waiting is not None else Finished(result)
        return await self._attempt(state, choice, probe)

    async def _permit(
        self, remaining: list[ProviderConfig], prober: str
    ) -> tuple[ProviderConfig | None, bool, list[Permit]]:
        """The first candidate whose breaker lets a call through, and whether that call is the half-open
        probe (``prober``: the item's batch, kept with the probe); None if every breaker is open, with
        their refusals."""
        refusals: list[Permit] = []
        grace = self.ctx.options.breaker_probe_grace_seconds
        for p in remaining:
            permit = await self.ride(
                "breaker",
                self.ctx.breaker.allow,
                p.name,
                probe_ttl_seconds=p.timeout_seconds + grace,
                prober=prober,
            )
            if permit.allowed:
                return p, permit.probe, []
            refusals.append(permit)
        return None, False, refusals

    async def _attempt(self, state: ItemState, choice: ProviderConfig, probe: bool) -> Finished | None:
        """Quota for ``choice``, then the send, then what the answer means for the item."""
        item, result = state.item, state.result
        limits = await self.ride("limits", self.limits.provider, choice)
        # noted durably before it can leave (before the quota wait, so no Redis round trip sits between
        # the bucket's grant and the send); it counts once the HTTP layer marks it sent (journal.sent)
        attempt = result.attempts + 1
        await self.ride("journal", self.ctx.journal.before_send, item, choice.name, attempt, state.est)
        waited_from = self.ctx.clock()
        try:
            admitted = await self.ride("quota", self._admit_bounded, limits, state)
        except (BudgetExceeded, TeamWaitingLimit) as exc:  # budget used up / too many calls waiting: not sent
            kind = ErrorType.BUDGET_EXCEEDED if isinstance(exc, BudgetExceeded) else TeamWaitingLimit.code
            result.error_type, result.error_message = kind, str(exc)
            result.error_status_code = None
            return Finished(result)
        except QuotaImpossible as exc:
            state.impossible.add(choice.name)
            if not result.attempts or result.error_type == ErrorType.QUOTA_IMPOSSIBLE:
                result.error_type, result.error_message = ErrorType.QUOTA_IMPOSSIBLE, str(exc)
                result.error_status_code = None
            return None
        except ProviderPaused as exc:  # paused by another answer (any worker): nothing sent, fall back now
            state.paused.add(choice.name)
            paused_at_admission(result, exc)
            return None
        if admitted is None:  # stopped before the send (nothing held, token given back)
            return Finished(self.stopping.end(result, self.stopping.stop_reason(item, result) or "cancelled"))
        self.ctx.observer.on_quota_wait(choice.name, self.ctx.clock() - waited_from)
        outcome, started = await send_attempt(self.ctx, state, choice, admitted, self.outcomes.pause_first)
        if outcome.stream is not None:  # streaming: the answer is the caller's to read, then end_stream
            return Finished(
                result, admitted.slot, OpenStream(state, choice, probe, admitted, outcome, started)
            )
        return await self._after_send(state, choice, probe, admitted, outcome, started)

    async def end_stream(self, stream: OpenStream, final: HttpOutcome) -> ItemResult:
        """The stream is over: give the lease back, record the attempt with how it ended (``final``:
        ok with the reported usage, an in-stream error, or the client gone) and close the in-flight
        slot. Never retried: the client already has bytes of this answer."""
        state, choice, admitted = stream.state, stream.choice, stream.admitted
        result = state.result
        try:
            await admitted.held.aclose()  # the provider lease: held until the last chunk
            state.per_provider[choice.name] = state.per_provider.get(choice.name, 0) + 1
            result.attempts += 1
            state.last_provider = choice.name
            entry = await self.outcomes.record(state.item, result, choice, admitted, final, stream.started)
            if final.ok:
                await self.outcomes.succeeded(result, choice, entry, final, probe=stream.probe)
            else:
                await self.outcomes.failed(
                    result, choice, stream.probe, admitted.request.limits, entry, final
                )
        finally:
            await admitted.slot.aclose()
        return result

    async def _admit_bounded(self, limits: ProviderLimits, state: ItemState) -> Admitted | None:
        """Admission that gives up (None, nothing held) when the item has to stop while waiting."""
        item, result = state.item, state.result
        while True:
            request = AdmissionRequest.for_item(
                limits,
                state.est,
                team=item.team,
                check_cancel=not result.attempts,
                input_tokens=state.est_input,
                output_tokens=state.est_output,
                lane=self.lane,
            )
            finished, admitted = await self.stopping.bounded(self.admission.admit(request), item)
            if finished:
                return admitted
            if admitted is not None:  # granted just as we gave up: give everything back
                await self.admission.release(admitted)
            if self.stopping.stop_reason(item, result):
                return None

    async def _after_send(
        self,
        state: ItemState,
        choice: ProviderConfig,
        probe: bool,
        admitted: Admitted,
        outcome: HttpOutcome,
        started: str,
    ) -> Finished | None:
        """Record the attempt; on success or a final failure return the result with its in-flight slot,
        else give the slot back and set the delay before the next attempt (None: go round again)."""
        result, slot = state.result, admitted.slot
        try:
            state.per_provider[choice.name] = state.per_provider.get(choice.name, 0) + 1
            result.attempts += 1
            state.last_provider = choice.name
            entry = await self.outcomes.record(state.item, result, choice, admitted, outcome, started)
            if outcome.ok:
                await self.outcomes.succeeded(result, choice, entry, outcome, probe=probe)
                return Finished(result, slot)
            failure = await self.outcomes.failed(
                result, choice, probe, admitted.request.limits, entry, outcome
            )
            if outcome.pause is not None:  # never again there: the next candidate, at once
                state.paused.add(choice.name)
            elif not is_retryable_error(outcome.error_type):
                return Finished(result, slot)
            if not state.remaining():
                return Finished(result, slot)
        except BaseException:
            await slot.aclose()  # never leak the process-wide in-flight slot
            raise
        await slot.aclose()
        self.ctx.observer.on_retry(choice.name, outcome.error_type)
        state.delay = retry_delay(self.ctx, state, choice, outcome, failure)
        return None


def item_state(ctx: RunContext, item: WorkItem) -> ItemState | ItemResult:
    """The item's candidates in order (its failed result ``no_provider`` when it cannot be routed),
    with what earlier claims of it spent (``item.carried``)."""
    result = ItemResult(item.custom_id, "failed")
    key = item.key or item.custom_id
    try:
        draw = stable_draw(item.batch_id or ctx.salt, key)
        cands = candidates(ctx.table, route=item.route, provider=item.provider, draw=draw, prefer=item.prefer)
    except RoutingError as exc:
        result.error_type, result.error_message = ErrorType.NO_PROVIDER, str(exc)
        return result
    if WIRE_FAMILY[item.endpoint] == EMBEDDINGS:  # only kinds that serve them (submission refuses others)
        serving = [c for c in cands if embeddings_api(c.kind) is not None]
        if not serving:
            result.error_type, result.error_message = ErrorType.NO_PROVIDER, no_embeddings(cands[0])
            return result
        cands = serving
    est_input, est_output = item_estimate(item, ctx.options.default_max_tokens)
    state = ItemState(item, result, key, cands, est_input + est_output, est_input, est_output)
    if item.carried is not None:
        state.per_provider = dict(item.carried.tried)
        state.breaker_waited = item.carried.breaker_waited
        if not state.remaining():
            result.error_type = ErrorType.NO_PROVIDER
            result.error_message = "retries at every provider spent on earlier claims of the item"
            return result
    return state
