"""The batch-API part of a simulated provider's configuration (issue #23): sim/batch_store.py runs it.

Every provider of kind openai, azure_openai or anthropic serves its kind's batch API; these keys shape
it (a gemini provider refuses them, naming the key). Durations are *simulated* milliseconds, scaled by
``time_scale`` like every other duration.

=========================== ===========================================================================
``batch_turnaround_ms``     create -> ended (default 60000): OpenAI/Azure spend the first 10 % in
                            ``validating`` and the last 10 % in ``finalizing``; lines are done at 90 %
``batch_progress``          true: lines finish one after another over [10 %, 90 %] (a cancel or the
                            window's end returns partial output); false (default): all at 90 %
``batch_window_ms``         the completion window (default 86400000 = 24 h): OpenAI expires a batch
                            still running then, Anthropic expires its unfinished lines; Azure keeps it
                            running (it does not expire late jobs)
``batch_cancel_ms``         cancelling / canceling -> cancelled / ended (default 1000)
``batch_line_error_rate``   fraction of lines answered with a 500 (deterministic by seed and line)
``batch_max_requests``      lines per batch (default 50000 for the OpenAI kinds, 100000 for Anthropic)
``batch_max_bytes``         bytes per input file / create body (default 200 MB / 256 MB)
``batch_create_delay_ms``   after a create call has stored its batch, wait this long before answering
                            (a kill -9 of the caller can land in the gap; default 0)
``batch_download_delay_ms`` wait this long before answering a results download (OpenAI/Azure output and
                            error files, Anthropic ``/results``): a kill -9 can land mid-download
                            (default 0)
``batch_deployment``        azure_openai: the Global-Batch deployment a line must name as its model
                            (default: the provider's ``deployment``)
=========================== ===========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.kind_config import ConfigError, number

BATCH_KEYS = {
    "batch_turnaround_ms",
    "batch_progress",
    "batch_window_ms",
    "batch_cancel_ms",
    "batch_line_error_rate",
    "batch_max_requests",
    "batch_max_bytes",
    "batch_create_delay_ms",
    "batch_download_delay_ms",
    "batch_deployment",
}
BATCH_KINDS = ("openai", "azure_openai", "anthropic")
DEFAULT_MAX_REQUESTS = {"openai": 50_000, "azure_openai": 50_000, "anthropic": 100_000}
DEFAULT_MAX_BYTES = {"openai": 200 * 1024 * 1024, "azure_openai": 200 * 1024 * 1024,
                     "anthropic": 256 * 1024 * 1024}  # fmt: skip
DAY_MS = 86_400_000.0


@dataclass(frozen=True)
class BatchConfig:
    turnaround_ms: float = 60_000.0
    progress: bool = False
    window_ms: float = DAY_MS
    cancel_ms: float = 1000.0
    line_error_rate: float = 0.0
    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    create_delay_ms: float = 0.0
    download_delay_ms: float = 0.0
    deployment: str | None = None  # azure_openai only


def parse_batch(raw: dict, kind: str, where: str, deployment: str | None = None) -> BatchConfig:
    """The batch options of one provider (``raw`` is its whole config object)."""
    given = sorted(set(raw) & BATCH_KEYS)
    if kind not in BATCH_KINDS:
        if given:
            raise ConfigError(f"{where}.{given[0]}: kind {kind} has no batch API")
        return BatchConfig()
    if "batch_deployment" in raw and kind != "azure_openai":
        raise ConfigError(f"{where}.batch_deployment: not an option of kind {kind}")
    progress = raw.get("batch_progress", False)
    if not isinstance(progress, bool):
        raise ConfigError(f"{where}.batch_progress: expected a boolean")
    batch_deployment = raw.get("batch_deployment", deployment)
    if kind == "azure_openai" and (not isinstance(batch_deployment, str) or not batch_deployment):
        raise ConfigError(f"{where}.batch_deployment: expected a non-empty string")
    return BatchConfig(
        turnaround_ms=number(raw, "batch_turnaround_ms", where, 60_000.0, minimum=0),
        progress=progress,
        window_ms=number(raw, "batch_window_ms", where, DAY_MS, minimum=1),
        cancel_ms=number(raw, "batch_cancel_ms", where, 1000.0, minimum=0),
        line_error_rate=number(raw, "batch_line_error_rate", where, 0.0, minimum=0, maximum=1),
        max_requests=number(
            raw, "batch_max_requests", where, DEFAULT_MAX_REQUESTS[kind], minimum=1, integer=True
        ),  # fmt: skip
        max_bytes=number(raw, "batch_max_bytes", where, DEFAULT_MAX_BYTES[kind], minimum=1, integer=True),
        create_delay_ms=number(raw, "batch_create_delay_ms", where, 0.0, minimum=0),
        download_delay_ms=number(raw, "batch_download_delay_ms", where, 0.0, minimum=0),
        deployment=batch_deployment if kind == "azure_openai" else None,
    )
