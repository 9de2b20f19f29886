"""manage.py submit_batch FILE.jsonl --team NAME [--wait] [--priority P] [--completion-window W]
[--cache|--no-cache] [--webhook-url URL] (docs/contract.md §3).

Uses the same submission service as the REST API (no HTTP). Progress and messages go to stderr;
the batch object (docs/contract.md §4) is printed as JSON on stdout at the end.

With workers (REDIS_URL set) the batch is queued for them and the command returns at once unless --wait.
In single-process mode (REDIS_URL unset) the batch runs on a thread of this very process, which cannot
outlive it: the command always waits (saying so), and when it stops early (--timeout, Ctrl-C) it
cancels what was not sent yet rather than leave items to fail at interpreter shutdown (#28).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from tqdm import tqdm

from batches.api.serializers import BatchSerializer
from batches.execution import cancel_batch
from batches.models import Batch, BatchStatus, ItemStatus
from batches.selectors import item_status_counts
from batches.submission import SubmissionError, batch_options, parse_jsonl, submit_batch
from batches.submission.fanout import targets_query
from gateway_site.commands import DatabaseCommand
from teams.models import Team

STATUS_ORDER = (
    ItemStatus.PENDING,
    ItemStatus.RUNNING,
    ItemStatus.SUCCEEDED,
    ItemStatus.FAILED,
    ItemStatus.CANCELLED,
    ItemStatus.EXPIRED,
)
DONE = (ItemStatus.SUCCEEDED, ItemStatus.FAILED, ItemStatus.CANCELLED, ItemStatus.EXPIRED)
PLAIN_PROGRESS_EVERY = 5.0  # seconds between progress lines when stderr is not a terminal
RUNS_HERE = (
    "single-process mode (REDIS_URL is unset) runs the batch inside this command, so it waits until the "
    "batch has ended (with REDIS_URL set, workers run it and the command returns at once)"
)


class Command(DatabaseCommand):
    help = "Submit a JSONL file (one ITEM per line) as a batch for a team; --wait shows progress until done."

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSONL file, one ITEM per line ('-' reads stdin).")
        parser.add_argument("--team", required=True, help="Team name (see create_team).")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="Show a progress bar until the batch finishes (single-process mode always waits).",
        )
        parser.add_argument("--metadata", default=None, help="A JSON object kept with the batch.")
        parser.add_argument(
            "--priority", default=None, help="Lane within the team: high, normal (default) or low."
        )
        parser.add_argument(
            "--completion-window",
            default=None,
            help="Deadline, e.g. 15m, 1h, 24h: items not sent by then end 'expired'.",
        )
        cache = parser.add_mutually_exclusive_group()
        cache.add_argument(
            "--cache", dest="cache", action="store_const", const=True, default=None,
            help="Answer every item from the response cache when an identical one was answered (docs/cache.md).",
        )  # fmt: skip
        cache.add_argument(
            "--no-cache", dest="cache", action="store_const", const=False,
            help="Never use the response cache for this batch (default: the route's cache setting).",
        )  # fmt: skip
        parser.add_argument(
            "--webhook-url",
            default=None,
            help="POST a signed event here when the batch ends (https://; docs/webhooks.md).",
        )
        parser.add_argument(
            "--provider-batch",
            default=None,
            choices=("auto", "never", "always"),
            help="Whether items may go through their provider's own batch API (default auto).",
        )
        parser.add_argument(
            "--steps",
            default=None,
            help="A JSON file holding the pipeline's steps list (docs/api.md 'Pipelines'): every item "
            "runs through them in order.",
        )
        parser.add_argument(
            "--targets",
            default=None,
            help="An evaluation: comma-separated route or provider names (docs/api.md 'Evaluations'); "
            "every item (without a route or provider of its own) is sent to each.",
        )
        parser.add_argument(
            "--poll", type=float, default=0.5, help="Seconds between progress checks (--wait)."
        )
        parser.add_argument(
            "--timeout", type=float, default=None, help="Stop waiting after this many seconds (exit code 1)."
        )

    def handle(self, *args, **options):
        try:
            team = Team.objects.get(name=options["team"])
        except Team.DoesNotExist:
            raise CommandError(
                f"--team: no team named {options['team']!r} (create it with create_team)"
            ) from None
        metadata = self._metadata(options["metadata"])
        if options["poll"] <= 0:
            raise CommandError("--poll: must be a positive number of seconds")
        body = self._read(options["file"])
        steps = self._steps(options["steps"])
        try:
            batch_opts = batch_options(
                options["priority"],
                options["completion_window"],
                cache=options["cache"],
                webhook_url=options["webhook_url"],
                provider_batch=options["provider_batch"],
            )
            parsed = parse_jsonl(body)
            batch = submit_batch(
                team=team,
                items=parsed.items,
                metadata=metadata,
                item_sizes=parsed.item_sizes,
                options=batch_opts,
                steps=steps,
                targets=targets_query(options["targets"]),
            )
        except SubmissionError as exc:
            for error in exc.errors:
                where = "body" if error.index is None else f"item {error.index}"
                self.stderr.write(f"{where}: {error.field}: {error.message}")
            raise CommandError(f"batch refused: {exc.error_count} problem(s); nothing was stored") from None
        self.stderr.write(f"submitted batch {batch.id} ({batch.total_count} items) for team {team.name}")
        # single-process mode: the batch runs on a thread of this process (batches.submission.enqueue_start)
        runs_here = bool(settings.GATEWAY_BACKGROUND_EAGER)
        wait = options["wait"] or runs_here
        if runs_here and not options["wait"]:
            self.stderr.write(RUNS_HERE)
        if wait:
            batch = self._wait(batch, options["poll"], options["timeout"], runs_here)
        self.stdout.write(json.dumps(BatchSerializer(batch).data, indent=2))
        if wait and batch.status != BatchStatus.COMPLETED:
            raise CommandError(f"batch {batch.id} finished with status {batch.status}")

    @staticmethod
    def _steps(path: str | None):
        """The steps list read from ``path`` (None: no pipeline); submission checks what is in it."""
        if path is None:
            return None
        try:
            return json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"--steps: cannot read {path}: {exc.strerror}") from None
        except (ValueError, RecursionError) as exc:
            raise CommandError(f"--steps: {path} is not valid JSON: {exc}") from None

    @staticmethod
    def _metadata(raw: str | None) -> dict:
        if raw is None:
            return {}
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--metadata: not valid JSON: {exc.msg}") from None
        if not isinstance(value, dict):
            raise CommandError("--metadata: must be a JSON object")
        return value

    @staticmethod
    def _read(path: str) -> bytes:
        if path == "-":
            return sys.stdin.buffer.read()
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None

    def _wait(self, batch: Batch, poll: float, timeout: float | None, runs_here: bool) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        stopped = ""  # why waiting stopped before the batch ended (single-process mode only)
        progress = _BarProgress(batch.total_count) if sys.stderr.isatty() else _LineProgress(self.stderr)
        with progress:
            try:
                while True:
                    batch.refresh_from_db()
                    counts = item_status_counts(batch)
                    progress.update(batch.status, sum(counts[s] for s in DONE), batch.total_count, counts)
                    if _ended(batch, runs_here):
                        return batch
                    if deadline is not None and time.monotonic() >= deadline:
                        if not runs_here:
                            raise CommandError(
                                f"--timeout: batch {batch.id} is still {batch.status}; it keeps running"
                            )
                        stopped = f"--timeout: batch {batch.id} was still {batch.status} after {timeout:g} s"
                        break
                    time.sleep(poll)
            except KeyboardInterrupt:
                if not runs_here:
                    raise
                stopped = f"interrupted: batch {batch.id} was still {batch.status}"
            # single-process mode: the batch's thread ends with this process; cancel what is unsent and
            # let the calls in flight answer, instead of leaving them to fail at interpreter shutdown
            self.stderr.write(
                f"{stopped}; single-process mode cannot leave it running after this command, so its "
                "unsent items are cancelled (waiting for the calls in flight)"
            )
            cancel_batch(str(batch.id))
            while not _ended(batch, runs_here):
                time.sleep(poll)
                batch.refresh_from_db()
                counts = item_status_counts(batch)
                progress.update(batch.status, sum(counts[s] for s in DONE), batch.total_count, counts)
        self.stdout.write(json.dumps(BatchSerializer(batch).data, indent=2))
        raise CommandError(f"{stopped}: cancelled its unsent items; it ended {batch.status}")


def _ended(batch: Batch, runs_here: bool) -> bool:
    """With workers: the batch has a final status. Single-process mode: it is finalized as well (a
    cancelled batch is `cancelled` at once while its calls in flight still answer, on this process's
    thread, which must not be cut off by the command's exit)."""
    return batch.completed_at is not None if runs_here else batch.is_terminal


def _counts_text(counts: dict[str, int]) -> str:
    return " ".join(f"{s}={counts[s]}" for s in STATUS_ORDER)


class _BarProgress:
    """On a terminal: a tqdm bar redrawn in place."""

    def __init__(self, total: int):
        self.bar = tqdm(total=total, unit="item", file=sys.stderr, dynamic_ncols=True)
        self.handlers: list[tuple[logging.StreamHandler, object]] = []

    def __enter__(self):
        # log lines (same handlers, formatters and filters) print above the bar instead of through it
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
                self.handlers.append((handler, handler.setStream(_AboveBar())))
        return self

    def __exit__(self, *exc):
        for handler, stream in self.handlers:
            handler.setStream(stream)
        self.bar.close()

    def update(self, status: str, done: int, total: int, counts: dict[str, int]) -> None:
        self.bar.n = done
        self.bar.set_postfix_str(_counts_text(counts), refresh=False)
        self.bar.set_description(status, refresh=False)
        self.bar.refresh()


class _AboveBar:
    """A stream for log handlers while the bar is shown: each line goes through tqdm.write."""

    def write(self, text: str) -> None:
        if text.strip():
            tqdm.write(text.rstrip("\n"), file=sys.stderr)

    def flush(self) -> None:
        sys.stderr.flush()


class _LineProgress:
    """Not a terminal (a log, CI): a plain line every PLAIN_PROGRESS_EVERY seconds and on status changes."""

    def __init__(self, stream):
        self.stream = stream
        self.last_at = float("-inf")
        self.last_status = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def update(self, status: str, done: int, total: int, counts: dict[str, int]) -> None:
        now = time.monotonic()
        if status == self.last_status and now - self.last_at < PLAIN_PROGRESS_EVERY:
            return
        self.stream.write(f"{status}: {done}/{total} items finished ({_counts_text(counts)})")
        self.last_at, self.last_status = now, status
