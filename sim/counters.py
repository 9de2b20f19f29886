"""Per-provider counters: what the simulator saw, billed and delivered."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field


@dataclass
class SlidingMax:
    """Maximum sum of values over any window of ``window`` seconds (events are (time, value)).

    The maximum over all windows is attained by a window ending at an event, so checking at
    every event is exact.
    """

    window: float
    events: deque = field(default_factory=deque)
    total: float = 0.0
    maximum: float = 0.0

    def add(self, now: float, value: float = 1.0) -> None:
        self.events.append((now, value))
        self.total += value
        horizon = now - self.window
        while self.events and self.events[0][0] <= horizon:
            self.total -= self.events.popleft()[1]
        if self.total > self.maximum:
            self.maximum = self.total


@dataclass
class ProviderCounters:
    minute_s: float
    requests: int = 0
    ok: int = 0
    rate_limited: int = 0  # 429s sent
    status_4xx: int = 0  # all 4xx including 429
    status_5xx: int = 0
    errors_500: int = 0  # 500 after processing (billed)
    overload_503: int = 0  # over max_concurrency
    outage_503: int = 0
    forced: int = 0  # fixed_status / status_script / x-sim-force-status answers
    hangs: int = 0
    disconnects: int = 0  # client went away while the request was being processed
    admitted: int = 0  # passed the rate limiter (RPM/TPM charged)
    accepted: int = 0  # admitted and processed (not turned away by the concurrency ceiling)
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0
    delivered_prompt_tokens: int = 0
    delivered_completion_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    shape_rejections: int = 0  # requests the kind's API would refuse as malformed (wrong route included)
    auth_rejections: int = 0  # requests refused for a missing / wrong key
    overloaded: int = 0  # the kind's overloaded form (Anthropic 529, Gemini 503 UNAVAILABLE, ...)
    spend_exhausted: int = 0  # spend forms sent after spend_exhausted_after
    per_day_429: int = 0  # Gemini per-day quota answers
    # prompt cache (sim/prompt_cache.py), per accepted request: hits read some prefix, misses read none
    prompt_cache_hits: int = 0
    prompt_cache_misses: int = 0
    cached_prompt_tokens: int = 0  # cache reads
    cache_write_tokens: int = 0  # cache writes (Anthropic)
    prompt_cache_evictions: int = 0  # entries pushed out of the LRU
    # streamed answers (sim/streaming.py): started = the 200 stream's headers went out; then exactly one of
    # completed (the end marker was written), errored (the in-stream error event was written),
    # cut (stream_cut_after closed the connection), aborted_by_client (the client went away first)
    streams_started: int = 0
    streams_completed: int = 0
    streams_errored: int = 0
    streams_cut: int = 0
    streams_aborted_by_client: int = 0
    by_status: Counter = field(default_factory=Counter)
    by_form: Counter = field(default_factory=Counter)  # named forms answered (scripts, triggers, windows)
    # requests per endpoint ("chat", "embeddings": sim/kinds.py endpoint_of), every answer included
    by_endpoint: Counter = field(default_factory=Counter)
    embedding_inputs: int = 0  # inputs embedded in the 200 answers of embeddings requests
    # requests per X-Request-ID header ("" = no header), every answer included: GET /_sim/requests
    by_request_id: dict[str, int] = field(default_factory=dict)
    first_accepted_at: float | None = None
    last_finished_at: float | None = None
    _req_window: SlidingMax | None = None
    _tok_window: SlidingMax | None = None
    _in_window: SlidingMax | None = None
    _out_window: SlidingMax | None = None

    def __post_init__(self):
        self._req_window = SlidingMax(self.minute_s)
        self._tok_window = SlidingMax(self.minute_s)
        self._in_window = SlidingMax(self.minute_s)
        self._out_window = SlidingMax(self.minute_s)

    def record_tokens(self, now: float, uncached_input: int, output: int) -> None:
        """An answered request's actual tokens: the ITPM measure (input minus cache reads) and output."""
        self._in_window.add(now, uncached_input)
        self._out_window.add(now, output)

    def record_request(self, request_id: str, endpoint: str = "chat") -> None:
        """A request reached one of the provider's routes (counted before anything can answer it)."""
        self.requests += 1
        self.by_endpoint[endpoint] += 1
        self.by_request_id[request_id] = self.by_request_id.get(request_id, 0) + 1

    def record_status(self, status: int) -> None:
        self.by_status[status] += 1
        if status == 200:
            self.ok += 1
        elif status == 429:
            self.rate_limited += 1
        if 400 <= status < 500:
            self.status_4xx += 1
        elif status >= 500:
            self.status_5xx += 1

    def record_admit(self, now: float, charged_tokens: int) -> None:
        """Passed the rate limiter: counts against RPM/TPM (even if the backend then answers 503)."""
        self.admitted += 1
        self._req_window.add(now, 1)
        self._tok_window.add(now, charged_tokens)

    def record_accept(self, now: float) -> None:
        self.accepted += 1
        if self.first_accepted_at is None:
            self.first_accepted_at = now
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def record_done(self, now: float) -> None:
        self.in_flight -= 1
        self.last_finished_at = now

    def stream_ended(self, outcome: str | None) -> None:
        """A started stream ended: "completed" | "errored" | "cut", None = the client went away."""
        if outcome == "completed":
            self.streams_completed += 1
        elif outcome == "errored":
            self.streams_errored += 1
        elif outcome == "cut":
            self.streams_cut += 1
        else:
            self.streams_aborted_by_client += 1
            self.disconnects += 1

    def record_cache(self, read: int, write: int) -> None:
        if read:
            self.prompt_cache_hits += 1
        else:
            self.prompt_cache_misses += 1
        self.cached_prompt_tokens += read
        self.cache_write_tokens += write

    def bill(self, prompt: int, completion: int) -> None:
        self.billed_prompt_tokens += prompt
        self.billed_completion_tokens += completion

    def deliver(self, prompt: int, completion: int) -> None:
        self.delivered_prompt_tokens += prompt
        self.delivered_completion_tokens += completion

    def snapshot(self) -> dict:
        billed = self.billed_prompt_tokens + self.billed_completion_tokens
        delivered = self.delivered_prompt_tokens + self.delivered_completion_tokens
        return {
            "requests": self.requests,
            "ok": self.ok,
            "rate_limited_429": self.rate_limited,
            "status_4xx": self.status_4xx,
            "status_5xx": self.status_5xx,
            "errors_500": self.errors_500,
            "overload_503": self.overload_503,
            "outage_503": self.outage_503,
            "forced": self.forced,
            "hangs": self.hangs,
            "disconnects": self.disconnects,
            "admitted": self.admitted,
            "accepted": self.accepted,
            "billed_prompt_tokens": self.billed_prompt_tokens,
            "billed_completion_tokens": self.billed_completion_tokens,
            "billed_tokens": billed,
            "delivered_prompt_tokens": self.delivered_prompt_tokens,
            "delivered_completion_tokens": self.delivered_completion_tokens,
            "delivered_tokens": delivered,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "max_accepted_per_minute": int(self._req_window.maximum),
            "max_charged_tokens_per_minute": int(self._tok_window.maximum),
            "minute_s": self.minute_s,
            "max_input_tokens_per_minute": int(self._in_window.maximum),
            "max_output_tokens_per_minute": int(self._out_window.maximum),
            "shape_rejections": self.shape_rejections,
            "auth_rejections": self.auth_rejections,
            "overloaded": self.overloaded,
            "spend_exhausted": self.spend_exhausted,
            "per_day_429": self.per_day_429,
            "prompt_cache_hits": self.prompt_cache_hits,
            "prompt_cache_misses": self.prompt_cache_misses,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "prompt_cache_evictions": self.prompt_cache_evictions,
            "streams_started": self.streams_started,
            "streams_completed": self.streams_completed,
            "streams_errored": self.streams_errored,
            "streams_cut": self.streams_cut,
            "streams_aborted_by_client": self.streams_aborted_by_client,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "by_form": dict(sorted(self.by_form.items())),
            "by_endpoint": dict(sorted(self.by_endpoint.items())),
            "embedding_inputs": self.embedding_inputs,
            "active_seconds": (
                round(self.last_finished_at - self.first_accepted_at, 3)
                if self.first_accepted_at is not None and self.last_finished_at is not None
                else None
            ),
        }
