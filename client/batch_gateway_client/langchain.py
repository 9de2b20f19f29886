"""``GatewayRunnable``: the gateway as a LangChain ``Runnable`` (``pip install './client[langchain]'``).

    from batch_gateway_client.langchain import GatewayRunnable

    llm = GatewayRunnable("http://127.0.0.1:8000", "bgw_...", model="intent", max_tokens=64)
    llm.invoke("Where is my order?")                  # one interactive call: POST /v1/chat/completions
    llm.batch(["q1 ...", "q2 ..."], priority="low")   # ONE gateway batch; AIMessages in input order

``invoke``/``ainvoke`` (and ``stream``/``astream``) use the interactive lane; ``batch``/``abatch`` submit
all their inputs as one gateway batch and wait for it, so the gateway — not a client-side thread pool
— shapes the traffic under each provider's quota. ``max_concurrency`` in the RunnableConfig is
therefore accepted and ignored: it is not needed (the gateway sends as fast as the providers allow,
whatever the number of inputs). Inputs are what a LangChain chat model takes: a string, a list of
messages (``BaseMessage``, ``("human", "...")`` tuples, OpenAI dicts) or a ``PromptValue``. Outputs
are ``AIMessage``s with ``usage_metadata`` and ``response_metadata`` (``provider``, ``finish_reason``,
``model_name``; for batch items also ``custom_id``, ``served_by``).

Batch options ``priority``, ``completion_window``, ``provider_batch`` (and ``metadata``, ``cache``,
``webhook_url``) are passed to the gateway only when given, at construction or per call
(``llm.batch(inputs, priority="high")``, ``llm.bind(priority="high")``); every other keyword
(``max_tokens``, ``temperature``, ``stop`` ...) is a provider param of each call or item. An item that
failed raises ``ItemFailedError`` from ``batch`` (``return_exceptions=True`` puts it in the item's place
instead).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig

from .client import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, Gateway
from .errors import GatewayError, ItemFailedError

try:  # langchain-core >= 0.3.x: content blocks, tool calls and tool results as OpenAI's API wants them
    from langchain_core.messages import convert_to_openai_messages as _to_openai
except ImportError:  # pragma: no cover - older langchain-core
    _to_openai = None

BATCH_OPTIONS = ("priority", "completion_window", "provider_batch", "metadata", "cache", "webhook_url")
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}

__all__ = ["GatewayRunnable"]


def openai_messages(value: LanguageModelInput) -> list[dict]:
    """A chat model's input as OpenAI messages."""
    if isinstance(value, PromptValue):
        messages: list[BaseMessage] = value.to_messages()
    elif isinstance(value, str):
        messages = [HumanMessage(value)]
    else:
        messages = convert_to_messages(value)
    if _to_openai is not None:
        return list(_to_openai(messages))
    return [{"role": _ROLES.get(m.type, m.type), "content": m.content} for m in messages]  # pragma: no cover


def _usage(usage: Mapping[str, Any] | None) -> dict | None:
    if not usage:
        return None
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    out: dict[str, Any] = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
    }
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached:
        out["input_token_details"] = {"cache_read": int(cached)}
    return out


def _tool_calls(message: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    good, bad = [], []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            args = json.loads(raw)
            if not isinstance(args, dict):
                raise ValueError("not an object")
            good.append(
                {"name": function.get("name", ""), "args": args, "id": call.get("id"), "type": "tool_call"}
            )
        except ValueError as exc:
            bad.append({"name": function.get("name"), "args": raw, "id": call.get("id"), "error": str(exc),
                        "type": "invalid_tool_call"})  # fmt: skip
    return good, bad


def message_from_completion(completion: Mapping[str, Any], **metadata: Any) -> AIMessage:
    """An OpenAI ``chat.completion`` (choice 0) as an AIMessage."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    tool_calls, invalid = _tool_calls(message)
    response_metadata = {
        "model_name": completion.get("model"),
        "finish_reason": choice.get("finish_reason"),
        "id": completion.get("id"),
        **{k: v for k, v in metadata.items() if v is not None},
    }
    kwargs: dict[str, Any] = {}
    usage = _usage(completion.get("usage"))
    if usage is not None:
        kwargs["usage_metadata"] = usage
    return AIMessage(
        content=message.get("content") or "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        response_metadata=response_metadata,
        id=completion.get("id"),
        **kwargs,
    )


def message_from_result(result: Mapping[str, Any]) -> AIMessage | ItemFailedError:
    """A batch RESULT as an AIMessage, or the ItemFailedError of an item that did not succeed."""
    if not result.get("ok") or not result.get("response"):
        return ItemFailedError(dict(result))
    return message_from_completion(
        result["response"],
        provider=result.get("provider"),
        custom_id=result.get("custom_id"),
        served_by=result.get("served_by"),
        attempts=result.get("attempts"),
    )


def _chunk(event: Mapping[str, Any]) -> AIMessageChunk | None:
    if event.get("usage") and not event.get("choices"):
        return AIMessageChunk(content="", usage_metadata=_usage(event["usage"]))
    choices = event.get("choices") or []
    if not choices:
        return None
    choice = choices[0]
    delta = choice.get("delta") or {}
    tool_chunks = [
        {
            "name": (c.get("function") or {}).get("name"),
            "args": (c.get("function") or {}).get("arguments"),
            "id": c.get("id"),
            "index": c.get("index"),
            "type": "tool_call_chunk",
        }
        for c in delta.get("tool_calls") or []
    ]
    metadata = {"finish_reason": choice["finish_reason"]} if choice.get("finish_reason") else {}
    if event.get("model") and metadata:
        metadata["model_name"] = event["model"]
    return AIMessageChunk(
        content=delta.get("content") or "",
        tool_call_chunks=tool_chunks,
        response_metadata=metadata,
        id=event.get("id"),
    )


class GatewayRunnable(Runnable[LanguageModelInput, AIMessage]):
    """The gateway as a LangChain Runnable for one ``model`` (a route, else a provider, as
    ``/v1/models`` lists them). Keywords: the batch options (module docstring), ``max_wait`` (the
    interactive calls' ``X-Gateway-Max-Wait``), ``timeout`` / ``retries`` (each HTTP call's, see
    ``Gateway``), ``wait_timeout`` (how long ``batch`` waits for its batch), ``progress`` (a bar on
    stderr while ``batch`` waits), ``gateway`` (a ``Gateway`` to use instead of a new one); any other
    keyword is a provider param (``max_tokens=64``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        priority: str | None = None,
        completion_window: str | None = None,
        provider_batch: str | None = None,
        max_wait: float | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        wait_timeout: float | None = None,
        progress: bool = False,
        gateway: Gateway | None = None,
        **params: Any,
    ):
        self.gateway = gateway or Gateway(base_url, api_key, timeout=timeout, retries=retries)
        self.model = model
        self.max_wait = max_wait
        self.wait_timeout = wait_timeout
        self.progress = progress
        options = {
            "priority": priority,
            "completion_window": completion_window,
            "provider_batch": provider_batch,
        }
        self.batch_options = {k: v for k, v in options.items() if v is not None}
        self.params = params
        self._field: str | None = None  # "route" or "provider", from /v1/models

    def __repr__(self) -> str:
        return f"GatewayRunnable({self.gateway.base_url!r}, model={self.model!r})"

    # --- what a call sends ------------------------------------------------------------------------

    def _split(self, kwargs: Mapping[str, Any]) -> tuple[dict, dict]:
        """(batch options, provider params) of a call: the Runnable's own, overridden by the call's."""
        options, params = dict(self.batch_options), dict(self.params)
        for name, value in kwargs.items():
            (options if name in BATCH_OPTIONS else params)[name] = value
        return {k: v for k, v in options.items() if v is not None}, params

    def _field_of(self, models: list[dict]) -> str | None:
        for entry in models:
            if entry.get("id") == self.model:
                return "route" if entry.get("owned_by") == "route" else "provider"
        return None

    def _target(self) -> str:
        # an ITEM names exactly one of route / provider; the interactive lane's rule: a route wins
        if self._field is None:
            try:
                self._field = self._field_of(self.gateway.models())
            except GatewayError:
                pass
        return self._field or "route"

    async def _atarget(self) -> str:
        if self._field is None:
            try:
                self._field = self._field_of(await self.gateway.amodels())
            except GatewayError:
                pass
        return self._field or "route"

    def _items(self, inputs: list[LanguageModelInput], field: str, params: dict) -> list[dict]:
        items = []
        for index, value in enumerate(inputs):
            item: dict[str, Any] = {
                "custom_id": str(index),
                field: self.model,
                "messages": openai_messages(value),
            }
            if params:
                item["params"] = params
            items.append(item)
        return items

    # --- interactive ------------------------------------------------------------------------------

    def _invoke(self, value: LanguageModelInput, **kwargs: Any) -> AIMessage:
        _, params = self._split(kwargs)
        completion = self.gateway.chat(self.model, openai_messages(value), max_wait=self.max_wait, **params)
        return message_from_completion(completion)

    async def _ainvoke(self, value: LanguageModelInput, **kwargs: Any) -> AIMessage:
        _, params = self._split(kwargs)
        completion = await self.gateway.achat(
            self.model, openai_messages(value), max_wait=self.max_wait, **params
        )
        return message_from_completion(completion)

    def invoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        """One interactive call (``POST /v1/chat/completions``)."""
        return self._call_with_config(self._invoke, input, config, **kwargs)

    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    def _stream_chunks(self, inputs: Iterator[LanguageModelInput], **kwargs: Any) -> Iterator[AIMessageChunk]:
        _, params = self._split(kwargs)
        params.setdefault("stream_options", {"include_usage": True})
        for value in inputs:
            with self.gateway.chat(self.model, openai_messages(value), stream=True, max_wait=self.max_wait,
                                   **params) as stream:  # fmt: skip
                for event in stream:
                    if (chunk := _chunk(event)) is not None:
                        yield chunk

    async def _astream_chunks(
        self, inputs: AsyncIterator[LanguageModelInput], **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        _, params = self._split(kwargs)
        params.setdefault("stream_options", {"include_usage": True})
        async for value in inputs:
            stream = await self.gateway.achat(
                self.model, openai_messages(value), stream=True, max_wait=self.max_wait, **params
            )
            async with stream:
                async for event in stream:
                    if (chunk := _chunk(event)) is not None:
                        yield chunk

    def stream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[AIMessageChunk]:
        """One streamed interactive call: AIMessageChunks as the provider answers (the last one
        carries ``usage_metadata``)."""
        yield from self._transform_stream_with_config(iter([input]), self._stream_chunks, config, **kwargs)

    async def astream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        async def one() -> AsyncIterator[LanguageModelInput]:
            yield input

        async for chunk in self._atransform_stream_with_config(one(), self._astream_chunks, config, **kwargs):
            yield chunk

    # --- one gateway batch ------------------------------------------------------------------------

    def _batch(self, inputs: list[LanguageModelInput], **kwargs: Any) -> list[AIMessage | Exception]:
        options, params = self._split(kwargs)
        items = self._items(inputs, self._target(), params)
        results = self.gateway.batch(items, progress=self.progress, wait_timeout=self.wait_timeout, **options)
        return [message_from_result(r) for r in results]

    async def _abatch(self, inputs: list[LanguageModelInput], **kwargs: Any) -> list[AIMessage | Exception]:
        options, params = self._split(kwargs)
        items = self._items(inputs, await self._atarget(), params)
        results = await self.gateway.abatch(
            items, progress=self.progress, wait_timeout=self.wait_timeout, **options
        )
        return [message_from_result(r) for r in results]

    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """Every input as an item of ONE gateway batch; waits for it and returns the AIMessages in
        input order. ``max_concurrency`` in ``config`` is accepted and ignored (not needed: the gateway
        paces the items). A failed item raises its ``ItemFailedError`` (or, with
        ``return_exceptions=True``, stands in its place)."""
        if not inputs:
            return []
        return self._batch_with_config(
            self._batch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )

    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """``batch`` for asyncio: one gateway batch, AIMessages in input order."""
        if not inputs:
            return []
        return await self._abatch_with_config(
            self._abatch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )
