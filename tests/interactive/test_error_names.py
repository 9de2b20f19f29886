"""One name per error type on every surface: the interactive lane's ``error.code`` and a /v1 batch
error line's ``code`` of the same error type come from one table (gateway_engine.error_kinds) and are
the contract's RESULT ``error.type`` name (docs/contract.md §4)."""

from __future__ import annotations

import json

import pytest

from gateway_engine.error_kinds import ERROR_KINDS
from gateway_engine.items import ItemResult
from gateway_engine.retry import ErrorType
from interactive.errors import call_failure
from openai_api.conversion import result_line

SAME_NAME = sorted(
    name
    for name, row in ERROR_KINDS.items()
    if row.line_code is not None and name not in (ErrorType.EXPIRED, ErrorType.CANCELLED)
)


def _interactive(error_type: str, status_code: int | None = None) -> dict:
    result = ItemResult("c", "failed", provider="p", attempts=1, error_type=error_type,
                        error_status_code=status_code, error_message="m")  # fmt: skip
    answer = call_failure(result, max_wait=30.0, retry_after=2.0).response()
    return {
        "status": answer.status_code,
        **json.loads(answer.content)["error"],
        "headers": dict(answer.items()),
    }


def _line(error_type: str, status_code: int | None = None) -> dict:
    result = {"custom_id": "c", "ok": False, "status": "failed", "response": None, "usage": None,
              "error": {"type": error_type, "status_code": status_code, "message": "m"}}  # fmt: skip
    return result_line(result, "batch_1")[1]


@pytest.mark.parametrize("error_type", SAME_NAME)
def test_the_interactive_code_and_the_batch_line_code_are_the_error_types_name(error_type):
    assert _interactive(error_type)["code"] == error_type
    assert _line(error_type)["error"]["code"] == error_type


def test_overloaded_is_overloaded_on_both_surfaces():
    answer = _interactive(ErrorType.OVERLOADED, 529)
    assert (answer["status"], answer["type"], answer["code"]) == (503, "server_error", "overloaded")
    assert "Retry-After" in answer["headers"]
    line = _line(ErrorType.OVERLOADED, 529)
    assert line["response"]["status_code"] == 529
    assert line["response"]["body"]["error"] == {"message": "m", "type": "server_error", "param": None,
                                                 "code": "overloaded"}  # fmt: skip
    assert _line(ErrorType.OVERLOADED)["error"] == {"code": "overloaded", "message": "m"}


def test_the_rows_headers_reach_the_interactive_answer():
    budget = _interactive(ErrorType.BUDGET_EXCEEDED)
    assert (budget["status"], budget["type"], budget["code"]) == (
        429,
        "insufficient_quota",
        "budget_exceeded",
    )
    assert budget["headers"]["x-should-retry"] == "false" and "Retry-After" not in budget["headers"]
    impossible = _interactive(ErrorType.QUOTA_IMPOSSIBLE)
    assert (impossible["status"], impossible["param"]) == (400, "max_tokens")
    expired = _interactive(ErrorType.EXPIRED)
    assert (expired["status"], expired["code"], expired["headers"]["Retry-After"]) == (
        429, "gateway_queue_timeout", "2")  # fmt: skip
    assert _line(ErrorType.EXPIRED)["error"]["code"] == "batch_expired"
