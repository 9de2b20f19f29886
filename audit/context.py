"""Who is changing configuration right now: set by the middleware (web requests) and around every
management command; "system"/"code" otherwise."""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

_actor: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("audit_actor", default=None)


def current() -> tuple[str, str]:
    return _actor.get() or ("system", "code")


@contextmanager
def acting_as(actor: str, via: str):
    token = _actor.set((actor[:150], via[:100]))
    try:
        yield
    finally:
        _actor.reset(token)


class AuditActorMiddleware:
    """After authentication: the request's user (or API key team) is the actor of changes it makes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        name = user.get_username() if user is not None and user.is_authenticated else "anonymous"
        path = request.path
        via = (
            "admin"
            if path.startswith("/admin/")
            else "dashboard"
            if path.startswith("/dashboard/")
            else "api"
        )
        with acting_as(name, via):
            return self.get_response(request)
