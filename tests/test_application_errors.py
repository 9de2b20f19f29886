"""The one error hierarchy (gateway_engine/errors.py) and its two handlers: every error a caller can get
subclasses ApplicationError with its status, and each surface maps any of them in one place."""

from __future__ import annotations

import pytest
from django.db import OperationalError as DbOperationalError
from rest_framework.exceptions import APIException

from batches.api.exceptions import DependencyUnavailable, InvalidQuery, exception_handler
from batches.execution.common import OutageTooLong
from batches.retry import RetryRefused
from batches.submission import (
    BudgetRefused,
    FieldError,
    IdempotencyConflict,
    QueueLimitRefused,
    SubmissionError,
)
from gateway_engine.breaker import BreakerUnavailable
from gateway_engine.errors import ApplicationError, Conflict, LimitExceeded, Unavailable
from gateway_engine.quota.types import BudgetExceeded, QuotaImpossible, QuotaStoreUnavailable
from gateway_engine.redis_errors import REDIS_ERRORS
from gateway_engine.routing import RoutingError
from gateway_site.security import RateLimiterUnavailable
from openai_api.conversion import InputFileError
from openai_api.errors import OpenAIError, openai_exception_handler
from providers.limits.source import UnknownProvider
from providers.services import ProviderConfigError


@pytest.mark.parametrize(
    "cls, status",
    [
        (SubmissionError, 400),
        (BudgetRefused, 400),  # its instances say 429
        (QueueLimitRefused, 400),  # its instances say 429
        (IdempotencyConflict, 409),
        (RetryRefused, 409),
        (InvalidQuery, 400),
        (DependencyUnavailable, 503),
        (OutageTooLong, 503),
        (BreakerUnavailable, 503),
        (RateLimiterUnavailable, 503),
        (QuotaStoreUnavailable, 503),
        (QuotaImpossible, 400),
        (BudgetExceeded, 429),
        (RoutingError, 400),
        (ProviderConfigError, 400),
        (UnknownProvider, 404),
        (InputFileError, 400),
        (OpenAIError, 400),
    ],
)
def test_every_caller_facing_error_is_an_application_error(cls, status):
    assert issubclass(cls, ApplicationError)
    assert cls.status == status and cls.code


def test_the_groups():
    assert issubclass(RetryRefused, Conflict) and issubclass(IdempotencyConflict, Conflict)
    assert issubclass(BudgetExceeded, LimitExceeded)
    for cls in (QuotaStoreUnavailable, BreakerUnavailable, RateLimiterUnavailable, DependencyUnavailable):
        assert issubclass(cls, Unavailable)
    assert issubclass(DependencyUnavailable, APIException)  # DRF's authentication treats it as a refusal
    assert issubclass(UnknownProvider, LookupError) and issubclass(OutageTooLong, RuntimeError)


def test_instances_carry_their_status_and_retry_after():
    assert SubmissionError(413, [FieldError(None, "body", "too large")]).status == 413
    refused = QueueLimitRefused("queued_items", "too many queued", 7)
    assert (refused.status, refused.message, refused.retry_after) == (429, "too many queued", 7)
    assert refused.response_headers() == {"Retry-After": "7"} == refused.headers
    assert IdempotencyConflict.field == "Idempotency-Key"


def test_redis_errors_are_the_unreachable_ones():
    from redis.exceptions import (
        BusyLoadingError,
        ConnectionError,
        MasterDownError,
        ReadOnlyError,
        ResponseError,
        TimeoutError,
    )

    # a failover's answers (a replica reached, a restarting or primary-less server) are an outage too
    assert REDIS_ERRORS == (ConnectionError, TimeoutError, ReadOnlyError, BusyLoadingError, MasterDownError)
    assert isinstance(BusyLoadingError(), REDIS_ERRORS)  # Redis restarting counts as down
    assert not isinstance(ResponseError(), REDIS_ERRORS)  # an error reply is a bug, not an outage


def test_the_api_handler_maps_any_application_error():
    response = exception_handler(ApplicationError("not an integer", field="Content-Length"), {})
    assert response.status_code == 400
    assert response.data == {
        "errors": [{"index": None, "field": "Content-Length", "message": "not an integer"}],
        "error_count": 1,
    }
    response = exception_handler(Conflict("busy", retry_after=3.7, details={"why": "x"}), {})
    assert (response.status_code, response.data, response["Retry-After"]) == (
        409,
        {"detail": "busy", "why": "x"},
        "3",
    )


def test_the_api_handler_names_the_dependency_that_is_down():
    for exc in (QuotaStoreUnavailable("down"), BreakerUnavailable("down"), REDIS_ERRORS[0]("refused")):
        response = exception_handler(exc, {})
        assert response.status_code == 503 and response["Retry-After"] == "5"
        assert response.data == {"detail": "redis is unavailable; retry in 5 s", "dependency": "redis"}


def test_the_openai_handler_maps_any_application_error():
    response = openai_exception_handler(ApplicationError("bad", field="x", code="invalid_value"), {})
    assert response.status_code == 400
    assert response.data == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": "x", "code": "invalid_value"}
    }
    limited = openai_exception_handler(LimitExceeded("slow down", retry_after=2), {})
    assert limited.status_code == 429 and limited["Retry-After"] == "2"
    assert limited.data["error"]["type"] == "rate_limit_error"
    down = openai_exception_handler(DependencyUnavailable("redis"), {})
    assert (down.status_code, down["Retry-After"]) == (503, "5")
    assert down.data["error"] == {
        "message": "redis is unavailable; retry in 5 s",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    for raw in (REDIS_ERRORS[0]("Error 111 connecting to 10.0.0.9:6379"), DbOperationalError("gone")):
        unreachable = openai_exception_handler(raw, {})  # past the throttle: the view's own call failed
        assert (unreachable.status_code, unreachable["Retry-After"]) == (503, "5"), raw
        assert unreachable.data["error"]["type"] == "server_error", raw
        assert unreachable.data["error"]["code"] == "dependency_unavailable", raw
        assert "10.0.0.9" not in unreachable.data["error"]["message"]
    store = openai_exception_handler(QuotaStoreUnavailable("quota store down"), {})
    assert store.status_code == 503
    assert (
        store.data["error"]["type"] == "server_error"
        and store.data["error"]["code"] == "quota_store_unavailable"
    )
    quota = OpenAIError(
        429, "full", param="limits.f", code="q", type="insufficient_quota", headers={"a": "b"}
    )
    response = openai_exception_handler(quota, {})
    assert (response.status_code, response["a"], response.data["error"]["code"]) == (429, "b", "q")
