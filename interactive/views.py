"""``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages`` and ``GET /v1/models``:
async views (served by gateway_site.asgi), so a process holds thousands of waiting or streaming calls
without a thread each. One call flow for every surface (interactive/surfaces/: each translates its
request to a chat call and the answer back): authenticate, check the call (calls.py), run it on this
process's interactive lane (lane.py), answer (the surface, errors.py, streams.py), record it
(records.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from batches.api.auth import ApiClient
from batches.api.exceptions import dependency_of
from batches.submission.caps import Limits
from gateway_engine.interactive import InteractiveLane
from gateway_engine.items import ItemResult
from gateway_engine.quota.types import QuotaStoreUnavailable
from gateway_engine.retry import ErrorType

from . import calls, streams
from .auth import authenticate
from .errors import CallError, call_failure
from .lane import current_lane, targets
from .outcome import finish_record, retry_after_for
from .surfaces.base import Answered, Surface
from .surfaces.chat import CHAT
from .surfaces.embeddings import EMBEDDINGS_SURFACE
from .surfaces.messages import MESSAGES
from .surfaces.responses import RESPONSES
from .targets import model_endpoints

log = logging.getLogger(__name__)

_active = 0  # calls this process holds now (GATEWAY_INTERACTIVE_MAX_CALLS)
View = Callable[[HttpRequest], Awaitable[HttpResponse]]
Render = Callable[[CallError], HttpResponse]


def dependencies_answer_503(view: View, render: Render | None = None) -> View:
    """Redis or the database unreachable anywhere in the view (the key check, the routing data, the
    quota pool): 503 with Retry-After (in OpenAI's shape, or ``render``'s: the surface's), never the 500
    of a bug."""
    answer: Render = render or CallError.response

    @functools.wraps(view)
    async def wrapped(request: HttpRequest) -> HttpResponse:
        try:
            return await view(request)
        except Exception as exc:
            dependency = dependency_of(exc)
            if dependency is None:
                raise
            log.warning("%s: %s unavailable (%s: %s)", request.path, dependency, type(exc).__name__, exc)
            if isinstance(exc, QuotaStoreUnavailable):
                return answer(_unavailable(str(exc)))
            return answer(CallError(503, f"{dependency} is unavailable; retry later", "server_error", None,
                                    "dependency_unavailable", {"Retry-After": "5"}))  # fmt: skip

    return wrapped


def _json_error(status: int, message: str, code: str, type_: str = "invalid_request_error") -> JsonResponse:
    return CallError(status, message, type_, None, code).response()


def surface_view(surface: Surface) -> View:
    """The view of one surface: the one call flow, answered in the surface's shapes."""

    async def view(request: HttpRequest) -> HttpResponse:
        return await _serve(request, surface)

    view.__name__ = view.__qualname__ = f"{surface.endpoint}_view"
    return csrf_exempt(dependencies_answer_503(view, surface.error_response))


def _refused_early(request: HttpRequest) -> CallError | None:
    """The method, the server kind and this process's call cap, before anything else."""
    if request.method != "POST":
        error = CallError(405, f"method {request.method} not allowed; use POST", code="method_not_allowed",
                          headers={"Allow": "POST"})  # fmt: skip
        return error
    if not settings.GATEWAY_ASGI:  # a WSGI process would build an engine per call and hold a thread per wait
        return CallError(503, f"POST {request.path} is served by the ASGI application "
                         "(gateway_site.asgi:application, docs/operations.md); this process runs the WSGI one",
                         "server_error", None, "asgi_required")  # fmt: skip
    if _active >= int(settings.GATEWAY_INTERACTIVE_MAX_CALLS):
        return CallError(429, "this web process holds as many calls as it may (GATEWAY_INTERACTIVE_MAX_CALLS)",
                         "rate_limit_error", None, "gateway_busy", {"Retry-After": "1"})  # fmt: skip
    return None


async def _prepared(request: HttpRequest, surface: Surface) -> tuple[calls.Call, ApiClient]:
    """The caller and the checked call (a CallError when refused)."""
    client = await authenticate(request)
    wait = calls.max_wait(request.headers.get(calls.MAX_WAIT_HEADER),
                          float(settings.GATEWAY_INTERACTIVE_MAX_WAIT_SECONDS))  # fmt: skip
    limits = Limits.from_settings()
    body = calls.read_body(request.body, limits.max_body_bytes)
    known, _ = await targets.current()
    call = calls.prepare(body, team=client.team.name, targets=known, limits=limits, wait=wait,
                         raw_size=len(request.body), surface=surface)  # fmt: skip
    return call, client


async def _serve(request: HttpRequest, surface: Surface) -> HttpResponse:
    global _active
    early = _refused_early(request)
    if early is not None:
        return surface.error_response(early)
    _active += 1
    handed_to_stream = False
    try:
        try:
            call, client = await _prepared(request, surface)
        except CallError as error:
            return surface.error_response(error)
        except QuotaStoreUnavailable as exc:
            return surface.error_response(_unavailable(str(exc)))
        lane = current_lane()
        if call.stream:
            response = await streams.open_response(lane, call, client, _leave)
            handed_to_stream = isinstance(response, StreamingHttpResponse)  # the stream's end calls _leave
            return response
        return await _complete(lane, call, client)
    finally:
        if not handed_to_stream:
            _active -= 1


async def _complete(lane: InteractiveLane, call: calls.Call, client: ApiClient) -> HttpResponse:
    """A plain call: the engine's answer in the surface's shape, recorded."""
    surface = call.surface
    try:
        result = await lane.complete(call.item)
    except QuotaStoreUnavailable as exc:
        return surface.error_response(_unavailable(str(exc)))
    except asyncio.CancelledError:  # the client left (gateway_site.asgi_interactive): the engine let go
        gone = ItemResult(call.call_id, "failed", error_type=ErrorType.CANCELLED,
                          error_message="the client disconnected before the answer")  # fmt: skip
        finish_record(call, client, gone, 499, None)
        raise
    body = None
    if result.ok:
        answered = Answered(call.call_id, call.model, call.echo, result.response or {},
                            result.cache_write_tokens or 0)  # fmt: skip
        body = surface.answer(answered)
        answer: HttpResponse = JsonResponse(body, status=200)
    else:
        retry_after = await retry_after_for(lane, result, call)
        answer = surface.error_response(call_failure(result, max_wait=call.max_wait, retry_after=retry_after))
    answer["x-gateway-provider"] = result.provider
    answer["x-gateway-attempts"] = str(result.attempts)
    finish_record(call, client, result, answer.status_code, body)  # the answer as the caller got it
    return answer


def _leave() -> None:
    global _active
    _active -= 1


def _unavailable(message: str) -> CallError:
    return CallError(503, message, "server_error", None, "quota_store_unavailable", {"Retry-After": "5"})


chat_completions = surface_view(CHAT)
responses = surface_view(RESPONSES)
messages = surface_view(MESSAGES)
embeddings = surface_view(EMBEDDINGS_SURFACE)
SURFACES: dict[str, Surface] = {
    "/v1/chat/completions": CHAT,
    "/v1/responses": RESPONSES,
    "/v1/messages": MESSAGES,
    "/v1/embeddings": EMBEDDINGS_SURFACE,
}


def error_answer(path: str, error: CallError) -> HttpResponse:
    """``error`` in the shape of the surface at ``path`` (OpenAI's for any other path)."""
    return SURFACES.get(path, CHAT).error_response(error)


@csrf_exempt
@dependencies_answer_503
async def models(request: HttpRequest) -> HttpResponse:
    """The team's routes and providers as OpenAI model objects (``owned_by``: "route" or the provider's
    kind); sorted by id."""
    if request.method != "GET":
        response = _json_error(405, f"method {request.method} not allowed; use GET", "method_not_allowed")
        response["Allow"] = "GET"
        return response
    try:
        await authenticate(request)
        known, table = await targets.current()
    except CallError as error:
        return error.response()
    created = int(time.time())
    data = [
        {
            "id": r,
            "object": "model",
            "created": created,
            "owned_by": "route",
            "endpoints": model_endpoints(known, r),
        }
        for r in sorted(known.routes)
    ]
    for name in sorted(p for p, enabled in known.providers.items() if enabled):
        config = table.providers.get(name)
        if name not in known.routes:
            data.append({"id": name, "object": "model", "created": created,
                         "owned_by": f"provider:{config.kind if config else 'openai'}",
                         "endpoints": model_endpoints(known, name)})  # fmt: skip
    return HttpResponse(json.dumps({"object": "list", "data": data}), content_type="application/json")
