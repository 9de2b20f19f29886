"""Submission's errors are ApplicationErrors (status, code, field for one handler per surface) and keep
the attributes the views read today. Plain pytest: no database."""

from __future__ import annotations

import types

from batches.submission.errors import (
    BudgetRefused,
    FieldError,
    IdempotencyConflict,
    QueueLimitRefused,
    SubmissionError,
    body_error,
)
from gateway_engine.errors import ApplicationError


def test_submission_error_maps_its_status_code_and_first_field():
    error = SubmissionError(
        400, [FieldError(0, "custom_id", "must not be empty"), FieldError(1, "route", "x")]
    )
    assert isinstance(error, ApplicationError)
    assert (error.status, error.status_code, error.code, error.field) == (
        400,
        400,
        "invalid_request",
        "custom_id",
    )
    assert str(error) == "0.custom_id: must not be empty; 1.route: x"
    assert error.as_dict()["error_count"] == 2
    too_large = body_error(413, "body", "too big")
    assert (too_large.status, too_large.code, too_large.field) == (413, "request_too_large", "body")
    assert body_error(415, "Content-Type", "no").code == "unsupported_media_type"


def test_queue_limit_keeps_its_message_and_retry_after():
    error = QueueLimitRefused("open_batches", "at most 5 open batches", 30)
    assert (error.status, error.code, error.field) == (429, "queue_limit_exceeded", "limits.open_batches")
    assert (error.message, error.retry_after, error.headers) == (
        "at most 5 open batches",
        30,
        {"Retry-After": "30"},
    )
    assert str(error) == "None.limits.open_batches: at most 5 open batches"
    assert error.as_dict()["limit"] == "open_batches"


def test_budget_refused_and_idempotency_conflict():
    exceeded = types.SimpleNamespace(period="daily", limit=10, used=9, remaining=1)
    error = BudgetRefused(exceeded)
    assert (error.status, error.code, error.field) == (429, "budget_exceeded", "budget")
    assert error.as_dict()["budget"] == {"period": "daily", "limit": 10, "used": 9, "remaining": 1}
    conflict = IdempotencyConflict(types.SimpleNamespace(id="b1"))
    assert (conflict.status, conflict.code, conflict.field) == (
        409,
        "idempotency_conflict",
        "Idempotency-Key",
    )
    assert str(conflict).startswith("Idempotency-Key already used for batch b1 with a different request")
