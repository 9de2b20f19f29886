"""The two OpenAI surfaces agree on every error type: the interactive lane's answer
(``/v1/chat/completions``: a plain HTTP error, or a stream's last ``data: {"error": …}`` frame) and a
``/v1`` batch output line carry the same OpenAI ``type`` and the same ``code`` for the same error type,
both read from its one row (gateway_engine/error_kinds.py). The only codes that differ are OpenAI's
batch-only ones, named in the row (``batch_expired``, ``batch_cancelled``)."""

from __future__ import annotations

import json

import pytest

from gateway_engine.error_kinds import ERROR_KINDS, ERROR_TYPES, QUEUE_TIMEOUT
from gateway_engine.items import ItemResult
from gateway_engine.retry import ErrorType
from interactive.errors import call_failure, stream_error_frame
from openai_api.conversion import result_line

# the batch-only codes of OpenAI's Batch API (and the interactive lane's contract name for a timeout)
BATCH_ONLY = {
    ErrorType.EXPIRED: ("gateway_queue_timeout", "batch_expired"),
    ErrorType.CANCELLED: ("cancelled", "batch_cancelled"),
}


def plain(error_type: str, status_code: int | None) -> tuple[int, dict]:
    result = ItemResult(
        "c", "failed", provider="p", attempts=1, error_type=error_type, error_status_code=status_code
    )
    result.error_message = "m"
    answer = call_failure(result, max_wait=30.0, retry_after=2.0).response()
    return answer.status_code, json.loads(answer.content)["error"]


def line(error_type: str, status_code: int | None) -> dict:
    result = {
        "custom_id": "c",
        "ok": False,
        "status": "failed",
        "response": None,
        "usage": None,
        "error": {"type": error_type, "status_code": status_code, "message": "m"},
    }
    return result_line(result, "batch_1")[1]


def line_type_and_code(error_type: str, status_code: int | None) -> tuple[str | None, str]:
    """(OpenAI type, code) of a /v1 line: a provider's answer keeps it as ``response`` with its body's
    error; any other failure is ``error: {code, message}`` (OpenAI's shape: no type there)."""
    out = line(error_type, status_code)
    if out["response"] is not None:
        body = out["response"]["body"]["error"]
        return body["type"], body["code"]
    return None, out["error"]["code"]


@pytest.mark.parametrize("error_type", ERROR_TYPES)
def test_every_error_type_reads_alike_on_both_surfaces(error_type):
    row = ERROR_KINDS[error_type]
    provider_status = 529 if error_type == ErrorType.OVERLOADED else row.status
    status, answer = plain(error_type, provider_status if row.provider_answer else None)
    frame = stream_error_frame(error_type, "m")["error"]
    line_type, line_code = line_type_and_code(error_type, provider_status if row.provider_answer else None)

    assert status == row.status
    assert answer["type"] == frame["type"] == row.openai_type
    assert answer["code"] == frame["code"] == row.code
    if row.provider_answer:  # a provider's answer: the line's body says what the interactive one says
        assert (line_type, line_code) == (answer["type"], answer["code"])
    expected_line = BATCH_ONLY.get(error_type, (row.code, row.code))
    assert (answer["code"], line_code) == expected_line


def test_an_overloaded_stream_frame_names_the_error_type_not_the_providers_code():
    """Before, a stream ended ``{"type": "server_error", "code": "overloaded_error"}`` (Anthropic's own
    name) while the plain answer said ``overloaded``; a 4xx in a stream was a ``server_error``."""
    assert stream_error_frame(ErrorType.OVERLOADED, "Overloaded")["error"] == {
        "message": "Overloaded",
        "type": "server_error",
        "code": "overloaded",
    }
    client = stream_error_frame(ErrorType.CLIENT_ERROR, "bad")["error"]
    assert (client["type"], client["code"]) == ("invalid_request_error", "client_error")
    assert stream_error_frame(ErrorType.RATE_LIMITED, "slow")["error"]["type"] == "rate_limit_error"


def test_a_line_of_an_item_without_an_error_type_takes_its_status_row():
    def status_line(status: str) -> str:
        result = {"custom_id": "c", "ok": False, "status": status, "error": {"message": "m"}}
        return result_line(result, "batch_1")[1]["error"]["code"]

    assert status_line("expired") == "batch_expired"
    assert status_line("cancelled") == "batch_cancelled"
    assert status_line("pending") == "batch_cancelled"  # not sent before the batch ended
    assert status_line("running") == status_line("failed") == "gateway_error"
    assert ERROR_KINDS[QUEUE_TIMEOUT].line_code is None  # an interactive refusal: never in a batch file
