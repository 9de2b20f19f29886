"""The errors a submission can end in: field-level problems, refused budgets and queue limits, and a
reused Idempotency-Key. Each is an ``ApplicationError`` (its ``status``, ``code`` and ``field`` let one
handler per surface map it) and keeps the attributes the views read today (``status_code``,
``errors``, ``as_dict()``, ``headers``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway_engine.errors import ApplicationError, Conflict
from gateway_engine.quota import BudgetExceeded

from ..models import Batch

MAX_ERRORS = 100  # errors listed in one response; `error_count` gives the total

# The machine code of a SubmissionError by HTTP status.
STATUS_CODES = {413: "request_too_large", 415: "unsupported_media_type"}


def safe_text(text: str) -> str:
    """Text that always encodes as UTF-8 (callers can send lone surrogates in keys and values)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class FieldError:
    """One problem: `index` is the item's 0-based position (None for body-level problems); `line` is the
    1-based line of a JSONL body the item came from (it differs from index + 1 after blank lines)."""

    index: int | None
    field: str
    message: str
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "field": safe_text(self.field),
            "message": safe_text(self.message),
        }
        if self.line is not None:
            out["line"] = self.line
        return out


class SubmissionError(ApplicationError):
    """Invalid submission. `status_code` is the HTTP status to answer (400, 413 or 415)."""

    def __init__(self, status_code: int, errors: list[FieldError], error_count: int | None = None):
        self.status_code = status_code
        self.errors = errors[:MAX_ERRORS]
        self.error_count = len(errors) if error_count is None else error_count
        super().__init__(
            "; ".join(f"{e.index}.{e.field}: {e.message}" for e in self.errors[:5]),
            status=status_code,
            code=STATUS_CODES.get(status_code, "invalid_request"),
            field=self.errors[0].field if self.errors else None,
        )

    def as_dict(self) -> dict[str, Any]:
        return {"errors": [e.as_dict() for e in self.errors], "error_count": self.error_count}


def body_error(status: int, field_name: str, message: str) -> SubmissionError:
    """A SubmissionError about the body as a whole (no item index)."""
    return SubmissionError(status, [FieldError(None, field_name, message)])


class BudgetRefused(SubmissionError):
    """429: the batch's estimated tokens exceed what is left of the team's daily or monthly budget."""

    code = "budget_exceeded"

    def __init__(self, exceeded: BudgetExceeded):
        self.exceeded = exceeded
        super().__init__(429, [FieldError(None, "budget", str(exceeded))])
        self.code = type(self).code

    def as_dict(self) -> dict[str, Any]:
        e = self.exceeded
        budget = {"period": e.period, "limit": e.limit, "used": e.used, "remaining": e.remaining}
        return {**super().as_dict(), "budget": budget}


class QueueLimitRefused(SubmissionError):
    """429: the team is at one of its queued-work limits (batches/submission/queue_limits.py); nothing is stored."""

    code = "queue_limit_exceeded"

    def __init__(self, limit: str, message: str, retry_after: int):
        super().__init__(429, [FieldError(None, f"limits.{limit}", message)])
        # set after the base: it stores the joined message and no Retry-After
        self.limit, self.message, self.retry_after = limit, message, int(retry_after)
        self.code = type(self).code

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "limit": self.limit, "retry_after": self.retry_after}

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class IdempotencyConflict(Conflict):
    """The key was already used by this team for a different request (HTTP 409)."""

    code = "idempotency_conflict"
    field = "Idempotency-Key"

    def __init__(self, batch: Batch):
        self.batch = batch
        super().__init__(
            f"Idempotency-Key already used for batch {batch.id} with a different request; "
            "use a new key for a new batch"
        )
