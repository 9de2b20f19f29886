"""``Gateway``: the REST API (``/api/v1/``) and the interactive lane (``/v1/chat/completions``) of one
gateway, over httpx. docs/client.md is the guide; docs/api.md and docs/interactive.md describe the
endpoints.

Retries of the client's own HTTP calls (``retries`` times at most, per call):

* a connection that could not be made (nothing was sent) is retried for every request;
* a ``429`` or ``503`` answer carrying ``Retry-After`` (at most ``max_retry_after`` seconds) is retried
  for every request, after that wait: the gateway answers so only when it stored and sent nothing
  (the key's throttle, the team's queue limits, a dependency down, the interactive lane's queue
  timeout); ``x-should-retry: false`` (a spent budget) is never retried;
* any other transport error (a timeout, a connection broken after the request went out) and a
  502/503/504 without ``Retry-After`` are retried only for requests that are safe to repeat: GETs,
  cancel, and a submission that carries an ``Idempotency-Key`` (``submit`` sends a new one per call
  by default, so a repeat returns the first batch instead of storing a second one). A submission
  without a key and a chat call are never sent twice after their request went out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ._batches import _BatchCalls, ended, in_input_order, with_custom_ids
from ._http import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, AsyncChatStream, ChatStream, _Retry

__all__ = ["AsyncChatStream", "ChatStream", "DEFAULT_RETRIES", "DEFAULT_TIMEOUT_S", "Gateway", "ended",
           "in_input_order", "with_custom_ids"]  # fmt: skip


def _messages(messages: str | Sequence[Mapping[str, Any]]) -> list[dict]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


class Gateway(_BatchCalls):
    """A client of one gateway for one team (its API key).

    ``base_url`` is the gateway's root (``http://host:8000``; a trailing ``/v1`` or ``/api/v1`` is
    dropped). ``timeout`` (seconds, or an ``httpx.Timeout``) bounds each HTTP call; ``retries`` is how
    many times one call may be repeated (see the module's docstring for when); a ``Retry-After`` longer
    than ``max_retry_after`` seconds is raised instead of waited for. ``poll_interval`` is the longest
    pause between two reads of a batch being waited for. ``transport`` / ``async_transport`` replace
    httpx's (tests, proxies).
    """

    @staticmethod
    def _chat_request(
        model: str,
        messages: Any,
        stream: bool,
        max_wait: float | None,
        timeout: Any,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        body = {"model": model, "messages": _messages(messages), **params}
        if stream:
            body["stream"] = True
        headers = {"X-Gateway-Max-Wait": f"{max_wait:g}"} if max_wait is not None else None
        return {"json": body, "headers": headers, "timeout": timeout}

    # --- the interactive lane ---------------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        stream: bool = False,
        max_wait: float | None = None,
        timeout: float | httpx.Timeout | None = None,
        **params: Any,
    ) -> Any:
        """One interactive call, ``POST /v1/chat/completions``: ``model`` names a route (else a
        provider); ``messages`` is the OpenAI list (a string is one user message); ``params``
        (``max_tokens``, ``temperature`` ...) go into the body. Returns the ``chat.completion`` dict;
        with ``stream=True`` a ``ChatStream`` of ``chat.completion.chunk`` dicts. ``max_wait`` sends
        ``X-Gateway-Max-Wait`` (how long the call may wait for quota; a longer wait is a
        ``RateLimitError`` with code ``gateway_queue_timeout``); ``timeout`` overrides the client's for
        this call. Never sent twice once the request went out."""
        request = self._chat_request(model, messages, stream, max_wait, timeout, params)
        response = self._send("POST", "/v1/chat/completions", policy=_Retry.ONCE, stream=stream, **request)
        return ChatStream(response) if stream else self._json(response)

    async def achat(
        self,
        model: str,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        stream: bool = False,
        max_wait: float | None = None,
        timeout: float | httpx.Timeout | None = None,
        **params: Any,
    ) -> Any:
        """``chat`` for asyncio (``AsyncChatStream`` with ``stream=True``)."""
        request = self._chat_request(model, messages, stream, max_wait, timeout, params)
        response = await self._asend(
            "POST", "/v1/chat/completions", policy=_Retry.ONCE, stream=stream, **request
        )
        return AsyncChatStream(response) if stream else self._json(response)

    def models(self) -> list[dict]:
        """``GET /v1/models``: the routes (``owned_by: "route"``) and enabled providers
        (``owned_by: "provider:<kind>"``), each a valid ``model``."""
        return self._json(self._send("GET", "/v1/models", policy=_Retry.SAFE))["data"]

    async def amodels(self) -> list[dict]:
        return self._json(await self._asend("GET", "/v1/models", policy=_Retry.SAFE))["data"]

    # --- life cycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Gateway({self.base_url!r})"
