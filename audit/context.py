"""Who is changing configuration right now: set by the middleware (web requests) and around every
management command; "system"/"code" otherwise."""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from teams.caller import api_caller, caller_scope

_actor: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("audit_actor", default=None)


def current() -> tuple[str, str]:
    """(actor, via): a request's user, or for an API request the API key it authenticated with and
    its team (teams.caller); "system"/"code" outside a request."""
    actor, via = _actor.get() or ("system", "code")
    key = api_caller()
    if actor == "anonymous" and key:
        actor = key[:150]
    return actor, via


@contextmanager
def acting_as(actor: str, via: str):
    token = _actor.set((actor[:150], via[:100]))
    try:
        yield
    finally:
        _actor.reset(token)


class AuditActorMiddleware:
    """After authentication: the request's user (or API key team) is the actor of changes it makes."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        user = getattr(request, "user", None)
        name = user.get_username() if user is not None and user.is_authenticated else "anonymous"
        with acting_as(name, _via(request.path)), caller_scope():
            return self.get_response(request)

    async def _acall(self, request):
        path = request.path
        if path.startswith("/v1/") or path.startswith("/api/"):  # API keys, no session user: no query here
            with acting_as("anonymous", "api"), caller_scope():
                return await self.get_response(request)
        auser = getattr(request, "auser", None)
        user = await auser() if auser is not None else None
        name = user.get_username() if user is not None and user.is_authenticated else "anonymous"
        with acting_as(name, _via(path)), caller_scope():
            return await self.get_response(request)


def _via(path: str) -> str:
    if path.startswith("/admin/"):
        return "admin"
    return "dashboard" if path.startswith("/dashboard/") else "api"
