"""CPU per item of each provider wire format against the OpenAI path (issue #21: no kind > 1.5×).

    .venv/bin/python bench/wire_cpu.py [--iterations 4000] [--rounds 15]

Per item, the engine's own work for one request and its answer, without I/O: build the body
(``wire.body``), JSON-encode it as the HTTP clients do, and read a realistic 200 answer of that kind
(bytes → ``outcomes.from_answer``: parse, clean, translate to the OpenAI shape, usage, the kind's
rate-limit headers). Thread CPU time (``time.thread_time``) over ``--iterations`` items per kind per
round; the kinds run interleaved in each round (order rotated), and each round gives a ratio
kind / openai; the table shows the median of the rounds (and the spread), so a noisy neighbour moves
all kinds of one round together instead of one kind.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway_engine.outcomes import from_answer  # noqa: E402
from gateway_engine.routing import ProviderConfig  # noqa: E402
from gateway_engine.wire import for_kind  # noqa: E402

KINDS = ("openai", "azure_openai", "anthropic", "gemini")
PROMPT = "Summarise the following support ticket in two sentences. " * 8
ANSWER_TEXT = "The customer cannot log in after the password reset; the reset mail arrives late. " * 4
MESSAGES = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": PROMPT},
]
PARAMS = {"max_tokens": 256, "temperature": 0.2}
BASES = {
    "openai": "http://openai.bench/v1",
    "azure_openai": "https://res.openai.azure.bench",
    "anthropic": "https://api.anthropic.bench/v1",
    "gemini": "https://generativelanguage.bench/v1beta",
}


def config(kind: str) -> ProviderConfig:
    entry: dict[str, Any] = {
        "name": f"bench-{kind}",
        "base_url": BASES[kind],
        "model": "bench-model",
        "rpm": 6000,
        "tpm": 10_000_000,
        "max_concurrency": 32,
        "api_key": "sk-bench",
        "kind": kind,
    }
    if kind == "azure_openai":
        entry["api_version"] = "2024-10-21"
    return ProviderConfig.from_dict(entry)


def openai_answer() -> dict[str, Any]:
    """As the Chat Completions API answers today (https://platform.openai.com/docs/api-reference/chat/object)."""
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_764_590_000,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER_TEXT, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 80,
            "total_tokens": 200,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_bench",
    }


def anthropic_answer() -> dict[str, Any]:
    return {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "bench-model",
        "content": [{"type": "text", "text": ANSWER_TEXT}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 80,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 20,
        },
    }


def gemini_answer() -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": ANSWER_TEXT}]},
                "finishReason": "STOP",
                "avgLogprobs": -0.12,
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 120,
            "candidatesTokenCount": 80,
            "totalTokenCount": 200,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 120}],
            "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 80}],
        },
        "modelVersion": "bench-model",
        "responseId": "bench",
    }


ANSWERS = {
    "openai": openai_answer,
    "azure_openai": openai_answer,
    "anthropic": anthropic_answer,
    "gemini": gemini_answer,
}
# the rate-limit headers each provider sends on a 200 (OpenAI / Azure: https://platform.openai.com/docs/guides/rate-limits,
# Anthropic: https://docs.anthropic.com/en/api/rate-limits; Gemini sends none)
HEADERS = {
    "openai": {
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-limit-tokens": "2000000",
        "x-ratelimit-remaining-requests": "9999",
        "x-ratelimit-remaining-tokens": "1999800",
        "x-ratelimit-reset-requests": "6ms",
        "x-ratelimit-reset-tokens": "6ms",
        "x-request-id": "req_bench",
    },
    "azure_openai": {
        "x-ratelimit-limit-requests": "600",
        "x-ratelimit-limit-tokens": "100000",
        "x-ratelimit-remaining-requests": "599",
        "x-ratelimit-remaining-tokens": "99800",
        "apim-request-id": "bench",
    },
    "anthropic": {
        f"anthropic-ratelimit-{family}-{part}": value
        for family, values in {
            "requests": ("4000", "3999", "2026-12-01T15:33:00Z"),
            "tokens": ("480000", "479800", "2026-12-01T15:32:40Z"),
            "input-tokens": ("400000", "399880", "2026-12-01T15:32:45Z"),
            "output-tokens": ("80000", "79920", "2026-12-01T15:32:50Z"),
        }.items()
        for part, value in zip(("limit", "remaining", "reset"), values, strict=True)
    }
    | {"request-id": "req_bench"},
    "gemini": {},
}


def one_kind(kind: str, iterations: int) -> float:
    """Thread CPU seconds per item for ``kind``."""
    wire, cfg = for_kind(kind), config(kind)
    raw = json.dumps(ANSWERS[kind]()).encode()
    headers = HEADERS[kind]
    start = time.thread_time()
    for _ in range(iterations):
        json.dumps(wire.body(cfg, MESSAGES, PARAMS)).encode()
        outcome = from_answer(wire, 200, 10, raw, headers)
    elapsed = time.thread_time() - start
    assert outcome.ok and outcome.body["choices"][0]["message"]["content"] == ANSWER_TEXT, kind
    return elapsed / iterations


def run(iterations: int, rounds: int) -> dict[str, dict[str, float]]:
    per_item: dict[str, list[float]] = {k: [] for k in KINDS}
    ratios: dict[str, list[float]] = {k: [] for k in KINDS}
    for kind in KINDS:  # warm-up
        one_kind(kind, max(100, iterations // 10))
    for r in range(rounds):
        order = KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]
        this_round = {kind: one_kind(kind, iterations) for kind in order}
        for kind in KINDS:
            per_item[kind].append(this_round[kind])
            ratios[kind].append(this_round[kind] / this_round["openai"])
    return {
        kind: {
            "us_per_item": statistics.median(per_item[kind]) * 1e6,
            "ratio": statistics.median(ratios[kind]),
            "ratio_min": min(ratios[kind]),
            "ratio_max": max(ratios[kind]),
        }
        for kind in KINDS
    }


def table(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "| kind | CPU µs / item (median) | × openai (median of rounds) | × openai (min – max) |",
        "|---|---|---|---|",
    ]
    for kind, row in results.items():
        lines.append(
            f"| {kind} | {row['us_per_item']:.1f} | {row['ratio']:.2f} | "
            f"{row['ratio_min']:.2f} – {row['ratio_max']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    results = run(args.iterations, args.rounds)
    print(
        f"python {platform.python_version()} on {platform.machine()}, {args.rounds} rounds × {args.iterations}"
    )
    print(table(results))
    worst = max(row["ratio"] for row in results.values())
    print(f"worst kind: {worst:.2f}× openai (goal ≤ 1.5×)")


if __name__ == "__main__":
    main()
