"""The API key a request acts with: set when the REST API authenticates the request's key
(``batches.api.auth``), read by the config history (``audit.context``), so an action taken through
the API (a cancel, a retry) names the key and its team instead of "anonymous"."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from .models import ApiKey

_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("api_caller", default=None)


def caller_name(key: ApiKey) -> str:
    """How the config history names an API key: its label (or visible prefix) and its team."""
    label = key.name or f"{key.prefix}…"
    return f"API key {label} (team {key.team.name})"


def set_api_caller(key: ApiKey) -> None:
    _caller.set(caller_name(key))


def api_caller() -> str | None:
    """The API key of the request being served (None: no key was authenticated in it)."""
    return _caller.get()


@contextmanager
def caller_scope() -> Iterator[None]:
    """One request: a key authenticated inside is forgotten when it ends (threads serve many)."""
    token = _caller.set(None)
    try:
        yield
    finally:
        _caller.reset(token)
