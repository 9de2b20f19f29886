"""``POST /v1/embeddings``: OpenAI's embeddings request and answer on the interactive lane (served by
gateway_site.asgi like ``/v1/chat/completions``), same keys, quota pool, routing, retries and request
log (``InteractiveCall.endpoint`` "embeddings"). Thin: authenticate, check the call
(embeddings_calls.py), run it on this process's lane (``lane.complete``: an embeddings ``WorkItem``
is sent with its kind's embeddings request, gateway_engine.wire.embeddings), answer (the provider's
OpenAI-shaped answer, or errors.py's OpenAI error), record it (outcome.py). No streaming: the OpenAI
API has none for embeddings, a ``stream`` field is refused naming it.

The process's cap on calls held at once (GATEWAY_INTERACTIVE_MAX_CALLS) is counted here for
embeddings calls as views.py counts it for chat calls."""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from batches.submission.caps import Limits
from gateway_engine.items import ItemResult
from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_engine.retry import ErrorType

from . import calls, embeddings_calls
from .auth import authenticate
from .errors import CallError, call_failure
from .lane import current_lane, targets
from .outcome import finish_record, retry_after_for
from .views import dependencies_answer_503

_active = 0  # embeddings calls this process holds now (GATEWAY_INTERACTIVE_MAX_CALLS)


def _refused_before(request: HttpRequest) -> HttpResponse | None:
    """The answers given before anything is read: a wrong method, a WSGI process, a full process."""
    if request.method != "POST":
        response = CallError(405, f"method {request.method} not allowed; use POST", code="method_not_allowed")
        answer = response.response()
        answer["Allow"] = "POST"
        return answer
    if not settings.GATEWAY_ASGI:
        return CallError(503, "POST /v1/embeddings is served by the ASGI application "
                         "(gateway_site.asgi:application, docs/operations.md); this process runs the WSGI one",
                         "server_error", None, "asgi_required").response()  # fmt: skip
    if _active >= int(settings.GATEWAY_INTERACTIVE_MAX_CALLS):
        return CallError(429, "this web process holds as many calls as it may (GATEWAY_INTERACTIVE_MAX_CALLS)",
                         "rate_limit_error", None, "gateway_busy", {"Retry-After": "1"}).response()  # fmt: skip
    return None


def _unavailable(message: str) -> JsonResponse:
    error = CallError(503, message, "server_error", None, "quota_store_unavailable", {"Retry-After": "5"})
    return error.response()


@csrf_exempt
@dependencies_answer_503
async def embeddings(request: HttpRequest) -> HttpResponse:
    global _active
    refused = _refused_before(request)
    if refused is not None:
        return refused
    _active += 1
    try:
        return await _serve(request)
    finally:
        _active -= 1


async def _serve(request: HttpRequest) -> HttpResponse:
    try:
        client = await authenticate(request)
        wait = calls.max_wait(request.headers.get(calls.MAX_WAIT_HEADER),
                              float(settings.GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS))  # fmt: skip
        limits = Limits.from_settings()
        body = calls.read_body(request.body, limits.max_body_bytes)
        known, _ = await targets.current()
        call = embeddings_calls.prepare(body, team=client.team.name, targets=known, limits=limits, wait=wait,
                                        raw_size=len(request.body))  # fmt: skip
    except CallError as error:
        return error.response()
    except QuotaStoreUnavailable as exc:
        return _unavailable(str(exc))
    lane = current_lane()
    try:
        result = await lane.complete(call.item)
    except QuotaStoreUnavailable as exc:
        return _unavailable(str(exc))
    except asyncio.CancelledError:  # the client left (gateway_site.asgi_interactive): the engine let go
        gone = ItemResult(call.call_id, "failed", error_type=ErrorType.CANCELLED,
                          error_message="the client disconnected before the answer")  # fmt: skip
        finish_record(call, client, gone, 499, None)
        raise
    if result.ok:
        answer = JsonResponse(result.response, status=200)
    else:
        retry_after = await retry_after_for(lane, result, call)
        answer = call_failure(result, max_wait=call.max_wait, retry_after=retry_after).response()
    answer["x-gateway-provider"] = result.provider
    answer["x-gateway-attempts"] = str(result.attempts)
    finish_record(call, client, result, answer.status_code, result.response if result.ok else None)
    return answer
