"""``ApplicationError``: the one base of every error a caller's request can cause.

Bad input, a refused limit, a missing object, an infrastructure outage the caller should hear about:
each is a subclass that says its HTTP ``status``, a stable machine ``code`` and, for bad input, the
``field`` it is about. The surfaces map it in one place each (the DRF exception handler for ``/api/``,
the OpenAI error shape for ``/v1/``), so no view maps errors by hand.

Django-free (the engine raises some of these too); imports nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApplicationError"]


class ApplicationError(Exception):
    """An error the caller caused or must be told about. Subclasses set ``status`` and ``code``."""

    status: int = 400
    code: str = "invalid_request"

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
        self.field = field
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.retry_after = retry_after  # seconds: a Retry-After header on the response
        self.details = dict(details or {})
