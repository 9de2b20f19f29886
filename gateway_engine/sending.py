"""One attempt's HTTP call, holding what admission gave it: the long lane and the provider lease are
released as soon as the answer is in (a stream's: when it ends, ``ItemLife.end_stream``); the in-flight
slot stays with the caller. Returns the outcome and when it was sent."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .endpoints import EMBEDDINGS, WIRE_FAMILY
from .outage import is_store_failure
from .outcomes import HttpOutcome
from .routing import ProviderConfig

if TYPE_CHECKING:
    from .admission import Admitted
    from .attempts import ItemState
    from .context import RunContext

__all__ = ["now_iso", "send_attempt"]

log = logging.getLogger("gateway_engine.attempts")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


PauseFirst = Callable[[ProviderConfig, HttpOutcome], Awaitable[None]]


async def send_attempt(
    ctx: RunContext, state: ItemState, choice: ProviderConfig, admitted: Admitted, pause_first: PauseFirst
) -> tuple[HttpOutcome, str]:
    """The call (``embed`` for an embeddings item: ``endpoints.WIRE_FAMILY``; ``open_stream`` when the
    item streams, else ``chat``) and when it was sent. An
    exception without an answer closes the slot and propagates; a store failure while giving the lease
    back after the answer is logged (the lease expires by itself). An answer that pauses the provider
    (billing exhausted, a per-day quota) is applied by ``pause_first`` before the lease goes back, so
    no item is granted that lease between the answer and the pause."""
    sent: HttpOutcome | None = None
    started = ""
    try:
        streaming = False
        try:
            started = now_iso()
            item, attempt, journal = state.item, state.result.attempts + 1, ctx.journal
            client = ctx.http.get(choice)
            on_sent = functools.partial(journal.sent, item, attempt)
            if WIRE_FAMILY[item.endpoint] == EMBEDDINGS and item.input is not None:
                sent = await client.embed(item.input, item.params, request_id=state.key, on_sent=on_sent)
            else:
                call = client.open_stream if state.stream else client.chat
                sent = await call(item.messages, item.params, request_id=state.key, on_sent=on_sent)
            streaming = sent.stream is not None
        finally:
            if not streaming:
                try:
                    if sent is not None and sent.pause is not None:
                        await pause_first(choice, sent)
                finally:
                    await admitted.held.aclose()
    except BaseException as exc:
        if sent is None or not is_store_failure(exc):
            await admitted.slot.aclose()
            raise
        log.warning("%s: lease not released (quota store unavailable); it expires", choice.name)
    assert sent is not None  # the call returned (an exception without an answer was re-raised)
    return sent, started
