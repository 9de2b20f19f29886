"""A streamed answer of one simulated provider (sim/provider.py step 11): head, content events
``shape.delay_s`` apart, then the tail — or, after ``error_after`` / ``cut_after`` content events, the
kind's error event / an abrupt close. A client that goes away (a write fails, the transport is gone
between events, or aiohttp cancels the handler on the disconnect: handler_cancellation) is counted in
``streams_aborted_by_client``. Billed when it ends, however it ends; delivered when completed."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from sim.streaming import Event, StreamPlan, StreamShape
from sim.wire_common import Call, Usage

if TYPE_CHECKING:
    from sim.provider import SimProvider


class _Writer:
    """Writes one stream's events, refusing once the client is gone."""

    def __init__(self, request: web.Request, response: web.StreamResponse, plan: StreamPlan) -> None:
        self.request, self.response, self.plan = request, response, plan
        self.written = 0

    async def write(self, event: Event) -> None:
        transport = self.request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client closed the stream")
        await self.response.write(self.plan.framing.encode(event, self.written))
        self.written += 1

    async def play(self, shape: StreamShape) -> str:
        """Head, content, then the tail or the fault; the outcome: completed | errored | cut."""
        plan = self.plan
        for event in plan.head:
            await self.write(event)
        fault = shape.error_after if shape.error_after is not None else shape.cut_after
        for sent, event in enumerate(plan.content):
            if fault is not None and sent >= fault:
                break
            if sent and shape.delay_s > 0:
                await asyncio.sleep(shape.delay_s)
            await self.write(event)
        if shape.cut_after is not None:
            if self.request.transport is not None:
                self.request.transport.close()  # what was written goes out; the body never ends
            return "cut"
        if shape.error_after is not None:
            await self.write(plan.error)
            outcome = "errored"
        else:
            for event in plan.tail:
                await self.write(event)
            outcome = "completed"
        end = plan.framing.close(self.written)
        if end:
            await self.response.write(end)
        return outcome


async def stream_answer(
    provider: SimProvider, request: web.Request, call: Call, split: Usage, completion: int, answer_form,
    shape: StreamShape, loop_time,
) -> web.StreamResponse:  # fmt: skip
    """Stream ``provider``'s answer to ``call`` (see the module docstring)."""
    c = provider.counters
    usage = Usage(split.prompt, completion, split.cache_read, split.cache_write)
    plan: StreamPlan = provider.kind.stream_plan(call, usage, answer_form, shape.chunks)
    headers = {**provider.kind.headers(provider.limits.state(loop_time())),
               "Content-Type": plan.framing.content_type, "Cache-Control": "no-cache"}  # fmt: skip
    response = web.StreamResponse(status=200, headers=headers)
    started = False
    outcome: str | None = None  # completed | errored | cut; None at the end: the client went away
    try:
        await response.prepare(request)
        started = True
        c.record_status(200)
        c.streams_started += 1
        if answer_form is not None:
            c.by_form[answer_form] += 1
        outcome = await _Writer(request, response, plan).play(shape)
        if outcome == "cut":
            return response
        if outcome == "completed":
            c.deliver(split.prompt, completion)
        await response.write_eof()
        return response
    except ConnectionResetError:  # the client went away (counted below); aiohttp ends the exchange
        return response
    finally:
        if started:
            c.stream_ended(outcome)
        else:
            c.disconnects += 1  # gone before the answer's first byte
        provider.finish_call(split, completion, call.max_tokens, loop_time())
