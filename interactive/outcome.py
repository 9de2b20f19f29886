"""After a call: its request-log record (records.py) and, for a failed one, how long the caller should
wait before retrying (the provider's current quota wait, from the shared buckets)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from django.utils import timezone

from batches.api.auth import ApiClient
from gateway_engine.interactive import InteractiveLane
from gateway_engine.items import ItemResult

from .calls import Call
from .records import CallRecord, call_log

log = logging.getLogger(__name__)


def finish_record(
    call: Call,
    client: ApiClient,
    result: ItemResult,
    http_status: int,
    answer: Any,
    *,
    first_send_ms: int | None = None,
) -> None:
    """Queue the call's log record (the prompt and the answer only if the team opted in)."""
    keep = bool(getattr(client.team, "log_interactive_content", False))
    queue_ms = first_send_ms if first_send_ms is not None else _queue_ms(call, result)
    call_log().add(
        CallRecord(
            call_id=call.call_id,
            created_at=timezone.now(),
            team_id=client.team.pk,
            api_key_id=client.api_key.pk,
            model=call.model,
            route=call.item.route,
            stream=call.stream,
            http_status=http_status,
            result=result,
            latency_ms=int((time.monotonic() - call.received) * 1000),
            queue_ms=queue_ms,
            request_body=call.body if keep else None,
            response_body=answer if keep else None,
            endpoint=call.item.endpoint,
        )
    )


def _queue_ms(call: Call, result: ItemResult) -> int | None:
    """Request in → its first attempt sent (the attempt log's wall-clock ``at``); None if never sent."""
    if not result.attempt_log or not call.received_at:
        return None
    try:
        sent = dt.datetime.fromisoformat(result.attempt_log[0]["at"]).timestamp()
    except (KeyError, ValueError):
        return None
    return max(0, int((sent - call.received_at) * 1000))


async def retry_after_for(lane: InteractiveLane, result: ItemResult, call: Call) -> float:
    """Seconds until the provider the call last tried (else its first candidate) has quota again (1
    when unknown)."""
    name = result.provider or call.item.provider
    try:
        table = await lane.table()
        if not name:
            rules = sorted((r for r in table.rules if r.route == call.item.route and r.enabled),
                           key=lambda r: r.priority)  # fmt: skip
            name = rules[0].provider if rules else ""
        config = table.providers.get(name) if name else None
        if config is None:
            return 1.0
        limits = await lane.limits.provider(config)
        state = await lane.store.snapshot(limits)  # type: ignore[attr-defined]
        return max(1.0, state.wait_ms / 1000.0)
    except Exception:  # noqa: BLE001 - only a hint: never turn an answer into a 500
        log.debug("no retry-after hint for %s", name, exc_info=True)
        return 1.0
