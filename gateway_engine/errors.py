"""``ApplicationError``: the one base of every error a caller's request can cause.

Bad input, a refused limit, a missing object, an infrastructure outage the caller should hear about:
each is a subclass that says its HTTP ``status``, a stable machine ``code`` and, for bad input, the
``field`` it is about. The surfaces map it in one place each (the DRF exception handler for ``/api/``,
``batches/api/exceptions.py``; the OpenAI error shape for ``/v1/``, ``openai_api/errors.py``), so no
view maps errors by hand. A subclass may set ``status``, ``code`` and ``field`` as class attributes;
the constructor's keywords override them for one instance.

The intermediate classes group errors by what the caller should do: ``Conflict`` (409, the state does
not allow it now), ``LimitExceeded`` (429, a limit refuses it) and ``Unavailable`` (503, a dependency
cannot be reached; retry later).

Django-free (the engine raises some of these too); imports nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApplicationError", "Conflict", "LimitExceeded", "Unavailable"]


class ApplicationError(Exception):
    """An error the caller caused or must be told about. Subclasses set ``status`` and ``code``."""

    status: int = 400
    code: str = "invalid_request"
    field: str | None = None
    retry_after: float | None = None  # seconds: a Retry-After header on the response

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        code: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if field is not None:
            self.field = field
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if retry_after is not None:
            self.retry_after = retry_after
        self.details = dict(details or {})

    def as_dict(self) -> dict[str, Any]:
        """The native (``/api/``) body: the errors list naming ``field``, else ``detail`` + ``details``."""
        if self.field is not None:
            error = {"index": None, "field": self.field, "message": self.message}
            return {"errors": [error], "error_count": 1}
        return {"detail": self.message, **self.details}

    def response_headers(self) -> dict[str, str]:
        """Headers of the response: ``Retry-After`` (whole seconds) when the caller should wait."""
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(int(self.retry_after))}


class Conflict(ApplicationError):
    """409: the object's state does not allow the request now."""

    status = 409
    code = "conflict"


class LimitExceeded(ApplicationError):
    """429: a limit (rate, quota, budget, queue) refuses the request."""

    status = 429
    code = "limit_exceeded"


class Unavailable(ApplicationError):
    """503: a dependency (Redis, the database, the broker) cannot be reached; retry later."""

    status = 503
    code = "unavailable"
