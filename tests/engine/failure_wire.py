"""Provider answers of the three failure kinds the engine must tell apart, and a wire format that reads
them the way the kinds' own wire modules do (room A's gateway_engine.wire.anthropic / gemini / the
OpenAI ``insufficient_quota`` rule), written independently of them. ``kind_for(...)`` gives the real kind after checking that its wire
module reads the answer as this one does (the engine tests then run on the real wire modules; a
wire module that reads one of these answers differently fails here, loudly).

Bodies copied from the providers' references:
* OpenAI 429 ``insufficient_quota``: https://platform.openai.com/docs/guides/error-codes/api-errors
* Anthropic 529 ``overloaded_error``: https://docs.anthropic.com/en/api/errors
* Gemini 429 ``RESOURCE_EXHAUSTED`` with ``QuotaFailure`` / ``RetryInfo``:
  https://ai.google.dev/gemini-api/docs/troubleshooting and https://cloud.google.com/apis/design/errors
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import gateway_engine.wire as wire
from gateway_engine.retry import ErrorType
from gateway_engine.wire import ErrorVerdict, OpenAIWire, Pause

INSUFFICIENT_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
ANTHROPIC_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
GEMINI_PER_DAY = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                        "quotaDimensions": {"location": "global", "model": "gemini-2.0-flash"},
                        "quotaValue": "200",
                    }
                ],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"},
        ],
    }
}

LA = ZoneInfo("America/Los_Angeles")


def next_la_midnight(now: datetime | None = None) -> float:
    """The next midnight America/Los_Angeles (DST-aware), as a Unix time: when a Gemini per-day quota
    resets."""
    local = (now or datetime.now(LA)).astimezone(LA)
    midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time(), tzinfo=LA)
    return midnight.timestamp()


def _error(body: Any) -> dict[str, Any]:
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


class ShapedWire(OpenAIWire):
    """OpenAI requests and answers; error answers read as the kinds' own modules read them."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def classify_error(self, status: int, body: Any) -> ErrorVerdict:
        error = _error(body)
        if status == 429 and error.get("code") == "insufficient_quota":
            message = "provider quota exhausted (insufficient_quota)"
            return ErrorVerdict(ErrorType.PROVIDER_QUOTA_EXHAUSTED, message, Pause("billing", None, message))
        if status == 529 or error.get("type") == "overloaded_error":
            return ErrorVerdict(ErrorType.OVERLOADED, f"HTTP {status}: provider overloaded")
        if status == 429 and error.get("status") == "RESOURCE_EXHAUSTED":
            ids = [
                v.get("quotaId", "")
                for d in error.get("details", [])
                for v in d.get("violations", [])
                if isinstance(v, dict)
            ]
            if any("PerDay" in i for i in ids):
                message = "per-day quota exhausted"
                until = next_la_midnight()
                return ErrorVerdict(ErrorType.RATE_LIMITED, message, Pause("per_day_quota", until, message))
        return super().classify_error(status, body)


def kind_for(monkeypatch: Any, real_kind: str, status: int, body: Any) -> str:
    """``real_kind``, once its wire module is known to read (status, body) as ShapedWire does (same
    error type, a pause or none alike). ``monkeypatch`` is kept for the callers' signature."""
    expected = ShapedWire("expected-" + real_kind).classify_error(status, body)
    verdict = wire.for_kind(real_kind).classify_error(status, body)
    assert verdict.error_type == expected.error_type, (real_kind, status, verdict, expected)
    assert (verdict.pause is None) == (expected.pause is None), (real_kind, status, verdict, expected)
    return real_kind
