"""The simulated batch APIs' state: files, batches and their life, one ``BatchStore`` per provider.

A batch's life is computed from the clock (no background task): created at ``t0`` with turnaround ``T``
(``batch_turnaround_ms`` / time_scale), window ``W`` (``batch_window_ms`` / time_scale):

* OpenAI / Azure ``status``: ``validating`` [t0, t0+0.1T) → ``in_progress`` → ``finalizing`` [0.9T, T)
  → ``completed``; a file refused by the line checks → ``failed`` at 0.1T (``errors``, no line runs);
  OpenAI past ``W`` → ``expired`` (lines done by then in the output file, the rest ``batch_expired`` in
  the error file); Azure never expires; ``cancel`` → ``cancelling`` → ``cancelled`` after
  ``batch_cancel_ms`` (lines done by the cancel in the output file, the rest nowhere).
* Anthropic ``processing_status``: ``in_progress`` → ``ended`` at T; lines unfinished at ``W`` →
  ``expired``; ``cancel`` → ``canceling`` → ``ended`` (unfinished lines ``canceled``); params the
  Messages API would refuse → ``errored`` (invalid_request_error), as the API validates them
  asynchronously.

Lines are done at 0.9T, or one after another over [0.1T, 0.9T] with ``batch_progress``. A line errors
(500 / api_error) with ``batch_line_error_rate``, drawn from a per-batch RNG seeded by the provider's
seed and the batch's sequence number (deterministic). A batch's results and counters are computed
once, when it ends (``settle``).
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sim.batch_config import BatchConfig
from sim.tokens import estimate_text_tokens
from sim.wire_common import Usage, split_cache
from sim.wire_embeddings import embedding_tokens, openai_answer, openai_call

LINE_COUNTER_KEYS = ("batch_lines_succeeded", "batch_lines_errored", "batch_lines_expired",
                     "batch_lines_canceled")  # fmt: skip
COUNTER_KEYS = ("batch_api_calls", "batch_files_uploaded", "batches_created", "batches_completed",
                "batches_failed", "batches_expired", "batches_cancelled", "batch_lines", *LINE_COUNTER_KEYS,
                "batch_shape_rejections", "batch_auth_rejections", "batch_billed_prompt_tokens",
                "batch_billed_completion_tokens", "batch_results_downloads",
                "batch_embedding_inputs")  # fmt: skip


@dataclass
class SimFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def info(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "status_details": None, "expires_at": None}  # fmt: skip


@dataclass
class SimLine:
    custom_id: str
    body: dict[str, Any]
    finish_s: float  # seconds after t0 at which the line is done
    fails: bool  # answered with a 500 / api_error
    invalid: str | None = None  # anthropic: the params problem (errored invalid_request_error)
    # set by settle: "succeeded" | "errored" | "expired" | "canceled" (None: the batch failed)
    outcome: str | None = None
    answer: dict[str, Any] | None = None


@dataclass
class SimBatch:
    id: str
    seq: int
    kind: str
    t0: float  # loop time
    created_at: float  # wall time
    turnaround_s: float
    window_s: float
    cancel_s: float
    lines: list[SimLine]
    endpoint: str = ""
    input_file_id: str = ""
    metadata: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)  # OpenAI validation errors -> failed
    cancel_t: float | None = None  # loop time of the cancel call
    cancel_wall: float | None = None
    settled: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def expires(self) -> bool:
        return self.kind != "azure_openai"

    def end(self) -> tuple[float, str, float]:
        """(end offset from t0, final status, cut offset: lines done by then count)."""
        T, W = self.turnaround_s, self.window_s
        if self.errors:
            return 0.1 * T, "failed", -1.0
        ends = [(T, "completed", T)]
        if self.expires and W < T:
            ends.append((W, "expired", W))
        if self.cancel_t is not None:
            c = self.cancel_t - self.t0
            ends.append((c + self.cancel_s, "cancelled", c))
        return min(ends, key=lambda e: e[0])

    def ended(self, now: float) -> bool:
        return now - self.t0 >= self.end()[0]

    def done_lines(self, now: float) -> list[SimLine]:
        """Lines done by ``now`` (and by the cut: cancel / window)."""
        _, _, cut = self.end()
        limit = min(now - self.t0, cut)
        return [ln for ln in self.lines if ln.finish_s <= limit]

    def openai_status(self, now: float) -> str:
        rel = now - self.t0
        end_at, final, _ = self.end()
        if rel >= end_at:
            return final
        if self.cancel_t is not None:
            return "cancelling"
        T = self.turnaround_s
        return "validating" if rel < 0.1 * T else "in_progress" if rel < 0.9 * T else "finalizing"

    def wall(self, offset: float) -> float:
        return self.created_at + offset


class BatchStore:
    """One provider's files and batches, its batch counters and per-custom-id line counts."""

    def __init__(self, cfg: Any, time_scale: float, seed: int | None, kind_adapter: Any):
        self.cfg = cfg  # sim.config.ProviderConfig
        self.bc: BatchConfig = cfg.batch
        self.time_scale = time_scale
        self.seed = cfg.seed if cfg.seed is not None else seed
        self.kind = kind_adapter  # sim.kinds adapter: validate / call / answer in the kind's shapes
        self.reset()

    def reset(self) -> None:
        self.files: dict[str, SimFile] = {}
        self.batches: dict[str, SimBatch] = {}
        self.order: list[str] = []  # creation order
        self.counters: Counter[str] = Counter({k: 0 for k in COUNTER_KEYS})
        self.lines_by_custom_id: dict[str, int] = {}
        self.seq = 0

    def seconds(self, ms: float) -> float:
        return ms / 1000.0 / self.time_scale

    # --- files ----------------------------------------------------------------------------------
    def add_file(self, filename: str, purpose: str, data: bytes) -> SimFile:
        f = SimFile(f"file-sim{uuid.uuid4().hex[:24]}", filename, purpose, data, int(time.time()))
        self.files[f.id] = f
        if purpose == "batch":
            self.counters["batch_files_uploaded"] += 1
        return f

    # --- batches --------------------------------------------------------------------------------
    def create(self, now: float, prefix: str, lines: list[tuple[str, dict[str, Any], str | None]],
               **extra: Any) -> SimBatch:  # fmt: skip
        """Store a batch of (custom_id, body, params problem) lines; ``extra``: SimBatch fields."""
        self.seq += 1
        rng = random.Random(f"{self.seed}:{self.cfg.name}:{self.seq}")
        T = self.seconds(self.bc.turnaround_ms)
        n = len(lines)
        sim_lines = []
        for i, (custom_id, body, invalid) in enumerate(lines):
            finish = 0.1 * T + 0.8 * T * (i + 1) / n if self.bc.progress else 0.9 * T
            fails = self.bc.line_error_rate > 0 and rng.random() < self.bc.line_error_rate
            sim_lines.append(SimLine(custom_id, body, finish, fails, invalid))
            self.lines_by_custom_id[custom_id] = self.lines_by_custom_id.get(custom_id, 0) + 1
        batch = SimBatch(id=f"{prefix}{uuid.uuid4().hex[:24]}", seq=self.seq, kind=self.cfg.kind, t0=now,
                         created_at=time.time(), turnaround_s=T, window_s=self.seconds(self.bc.window_ms),
                         cancel_s=self.seconds(self.bc.cancel_ms), lines=sim_lines, **extra)  # fmt: skip
        self.batches[batch.id] = batch
        self.order.append(batch.id)
        self.counters["batches_created"] += 1
        self.counters["batch_lines"] += n
        return batch

    def cancel(self, batch: SimBatch, now: float) -> None:
        if batch.cancel_t is None and not batch.ended(now):
            batch.cancel_t = now
            batch.cancel_wall = time.time()

    def newest_first(self) -> list[SimBatch]:
        return [self.batches[i] for i in reversed(self.order)]

    def settle_all(self, now: float) -> None:
        for batch in self.batches.values():
            self.settle(batch, now)

    def settle(self, batch: SimBatch, now: float) -> None:
        """Once a batch has ended: every line's outcome and answer, its files, the counters."""
        if batch.settled or not batch.ended(now):
            return
        batch.settled = True
        _, final, cut = batch.end()
        self.counters[f"batches_{final}"] += 1
        if final == "failed":
            return
        rng = random.Random(f"{self.seed}:{self.cfg.name}:{batch.seq}:tokens")
        for line in batch.lines:
            if line.finish_s <= cut:
                self._answer(line, rng, embeddings=batch.endpoint.endswith("/embeddings"))
            elif final == "expired":
                line.outcome = "expired"
            elif final == "cancelled":
                line.outcome = "canceled"  # OpenAI / Azure: in neither file
            if line.outcome:
                self.counters[f"batch_lines_{line.outcome}"] += 1

    def _answer(self, line: SimLine, rng: random.Random, embeddings: bool = False) -> None:
        if line.invalid is not None or line.fails:
            line.outcome = "errored"
            return
        if embeddings:  # an embeddings line: its input billed, no completion
            emb = openai_call(line.body, str(line.body.get("model") or ""))
            tokens = embedding_tokens(emb.texts)
            line.answer = openai_answer(emb, Usage(tokens, 0, 0, 0))
            line.outcome = "succeeded"
            self.counters["batch_billed_prompt_tokens"] += tokens
            self.counters["batch_embedding_inputs"] += len(emb.texts)
            return
        call = self.kind.call(line.body, NO_REQUEST)
        prompt = estimate_text_tokens(call.texts)
        native = self.cfg.native
        write = native.cache_write_ratio if self.cfg.kind == "anthropic" else 0.0
        split = split_cache(prompt, native.cache_read_ratio, write)
        completion = self._completion_tokens(call.max_tokens, rng)
        usage = Usage(split.prompt, completion, split.cache_read, split.cache_write)
        line.answer = self.kind.answer(call, usage, None)
        line.outcome = "succeeded"
        self.counters["batch_billed_prompt_tokens"] += split.prompt
        self.counters["batch_billed_completion_tokens"] += completion

    def _completion_tokens(self, max_tokens: int, rng: random.Random) -> int:
        c = self.cfg.completion
        if c is None:
            return max_tokens
        value = c.median * math.exp(c.sigma * rng.gauss(0.0, 1.0)) if c.sigma else c.median
        return max(1, min(max_tokens, max(c.minimum, round(value))))

    def snapshot(self, now: float) -> dict[str, int]:
        self.settle_all(now)
        return dict(self.counters)


class NoRequest:
    """What a kind adapter's ``validate`` / ``call`` read of a request, for a batch line (no headers, no
    query, no path)."""

    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    match_info: dict[str, str] = {}


NO_REQUEST = NoRequest()
