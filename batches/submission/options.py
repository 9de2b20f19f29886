"""Batch options: ``priority``, ``completion_window``, ``cache``, ``webhook_url`` and ``provider_batch``
(top-level JSON fields, or query parameters for a JSONL body; docs/contract.md §4), checked into a
``BatchOptions``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings

from ..models import BatchPriority, ProviderBatchMode
from . import webhook_url as webhook_urls
from .errors import FieldError, SubmissionError
from .json_values import type_name

PRIORITIES = tuple(p.value for p in BatchPriority)
PROVIDER_BATCH_MODES = tuple(m.value for m in ProviderBatchMode)
COMPLETION_WINDOW_RE = re.compile(r"^[1-9][0-9]*(s|m|h|d)$")
WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_COMPLETION_WINDOW = timedelta(seconds=10)
MAX_COMPLETION_WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class BatchOptions:
    priority: str = BatchPriority.NORMAL
    completion_window: str = ""
    window: timedelta | None = None
    webhook_url: str = ""  # "" = none given (the team's default URL, if any, is used at the batch's end)
    provider_batch: str = "auto"
    cache: bool | None = None  # the response cache (docs/cache.md); None: the route's setting decides


# a JSONL body's ``cache`` query parameter (text); the JSON body's field is a JSON boolean
CACHE_WORDS = {"true": True, "1": True, "false": False, "0": False}


def _cache(value: Any, errors: list[FieldError]) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in CACHE_WORDS:
        return CACHE_WORDS[value.strip().lower()]
    errors.append(
        FieldError(None, "cache", f"must be true or false, got {type_name(value)} {str(value)[:40]!r}")
    )
    return None


def parse_window(value: str) -> timedelta | None:
    """'15m' → 15 minutes; None if the text is not of the form ^[1-9][0-9]*(s|m|h|d)$."""
    if not COMPLETION_WINDOW_RE.match(value):
        return None
    return timedelta(seconds=int(value[:-1]) * WINDOW_UNITS[value[-1]])


def _window(completion_window: Any, errors: list[FieldError]) -> tuple[str, timedelta | None]:
    if completion_window is None or completion_window == "":
        return "", None
    if not isinstance(completion_window, str):
        errors.append(
            FieldError(
                None, "completion_window", f"must be a string like '15m', got {type_name(completion_window)}"
            )
        )
        return completion_window, None
    window = parse_window(completion_window)
    if window is None or not (MIN_COMPLETION_WINDOW <= window <= MAX_COMPLETION_WINDOW):
        errors.append(
            FieldError(
                None,
                "completion_window",
                "must match ^[1-9][0-9]*(s|m|h|d)$ and lie between 10s and 7d (e.g. '15m', '24h')",
            )
        )
    return completion_window, window


def _webhook_url(value: Any, allow_private: bool | None, errors: list[FieldError]) -> str:
    if value is None or value == "":
        return ""
    allow = bool(settings.GATEWAY_WEBHOOK_ALLOW_PRIVATE) if allow_private is None else allow_private
    try:
        return webhook_urls.check(value, allow_private=allow)
    except webhook_urls.WebhookUrlError as exc:
        errors.append(FieldError(None, webhook_urls.FIELD, str(exc)))
        return ""


def batch_options(
    priority: Any = None,
    completion_window: Any = None,
    *,
    cache: Any = None,
    provider_batch: Any = None,
    webhook_url: Any = None,
    allow_private_webhooks: bool | None = None,
) -> BatchOptions:
    """Validate the batch options; raise SubmissionError(400) naming each bad field. Private webhook
    targets follow ``GATEWAY_WEBHOOK_ALLOW_PRIVATE`` unless ``allow_private_webhooks`` says otherwise."""
    errors: list[FieldError] = []
    if priority is None or priority == "":
        priority = BatchPriority.NORMAL.value
    elif priority not in PRIORITIES:
        errors.append(FieldError(None, "priority", f"must be one of {', '.join(PRIORITIES)}"))
    completion_window, window = _window(completion_window, errors)
    cached = _cache(cache, errors)
    url = _webhook_url(webhook_url, allow_private_webhooks, errors)
    if provider_batch is None or provider_batch == "":
        provider_batch = ProviderBatchMode.AUTO.value
    elif provider_batch not in PROVIDER_BATCH_MODES:
        errors.append(FieldError(None, "provider_batch", f"must be one of {', '.join(PROVIDER_BATCH_MODES)}"))
    if errors:
        raise SubmissionError(400, errors)
    return BatchOptions(
        priority=str(priority),
        completion_window=completion_window,
        window=window,
        cache=cached,
        webhook_url=url,
        provider_batch=str(provider_batch),
    )
