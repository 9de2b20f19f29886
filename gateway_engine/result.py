"""The contract's RESULT object (docs/contract.md §4, plus ``status``), built from plain values.

The one builder of a per-item result dict: the engine's ``ItemResult.as_result()`` and the stored
item read back (``batches.selectors.result_from_row``: REST results pages, the JSONL stream, the
OpenAI output and error files) both call ``result_dict``, so a result looks the same whichever path
shows it.
"""

from __future__ import annotations

from typing import Any

# An item without an outcome (yet) has ok=false and an error whose type is its status, so a client
# can tell "not run yet" from a provider failure.
NOT_FINISHED_MESSAGES = {
    "pending": "not sent yet",
    "running": "in flight",
    "cancelled": "cancelled before it was sent",
}
# a failed item that names no error type (should not happen; never shown as an empty type)
DEFAULT_ERROR_TYPE = "gateway_error"


def result_dict(
    custom_id: str,
    status: str,
    *,
    provider: str = "",
    attempts: int = 0,
    latency_ms: int | None = None,
    response: Any = None,
    error_type: str = "",
    error_status_code: int | None = None,
    error_message: str = "",
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    total_tokens: int | None = None,
    cached_tokens: int | None = None,
    cache_write_tokens: int | None = None,
    served_by: str = "realtime",
) -> dict[str, Any]:
    """One RESULT: {custom_id, ok, status, provider, attempts, latency_ms, response, error, usage,
    served_by} (``served_by``: ``realtime``, ``provider_batch`` or ``cache``, docs/contract.md §4).

    ``usage`` carries the prompt-cache counts the OpenAI way, only when the provider reported them:
    ``prompt_tokens_details.cached_tokens`` (OpenAI's own field) and, beside it,
    ``prompt_tokens_details.x_gateway_cache_write_tokens`` (OpenAI has no cache-write count; Anthropic
    bills it). Both are parts of ``prompt_tokens``, which is all input (docs/api.md "Results")."""
    ok = status == "succeeded"
    if ok:
        error = None
    elif status == "failed":
        error = {
            "type": error_type or DEFAULT_ERROR_TYPE,
            "status_code": error_status_code,
            "message": error_message,
        }
    else:
        error = {
            "type": status,
            "status_code": None,
            "message": error_message or NOT_FINISHED_MESSAGES.get(status, status),
        }
    return {
        "custom_id": custom_id,
        "ok": ok,
        "status": status,
        "provider": provider,
        "attempts": attempts,
        "latency_ms": latency_ms or 0,
        "response": response,
        "error": error,
        "usage": _usage(prompt_tokens, completion_tokens, total_tokens, cached_tokens, cache_write_tokens),
        "served_by": served_by,
    }


def _usage(
    prompt_tokens: int | None,
    completion_tokens: int | None,
    total_tokens: int | None,
    cached_tokens: int | None,
    cache_write_tokens: int | None,
) -> dict[str, Any] | None:
    """The RESULT's usage: None when the provider reported none."""
    if prompt_tokens is None and completion_tokens is None and total_tokens is None:
        return None
    prompt, completion = prompt_tokens or 0, completion_tokens or 0
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total_tokens if total_tokens is not None else prompt + completion,
    }
    details = _prompt_details(cached_tokens, cache_write_tokens)
    if details:
        usage["prompt_tokens_details"] = details
    return usage


def _prompt_details(cached_tokens: int | None, cache_write_tokens: int | None) -> dict[str, int]:
    """The reported prompt-cache counts (an unreported one is left out, never shown as 0)."""
    details = {}
    if cached_tokens is not None:
        details["cached_tokens"] = cached_tokens
    if cache_write_tokens is not None:
        details["x_gateway_cache_write_tokens"] = cache_write_tokens
    return details
