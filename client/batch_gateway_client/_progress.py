"""The progress display of a batch being waited for, on stderr: a tqdm bar when tqdm is installed
(never a requirement), else one plain line (rewritten in place on a terminal, a new line at most every
few seconds elsewhere, so logs stay short)."""

from __future__ import annotations

import sys
import time
from typing import Any

FINISHED = ("completed", "failed", "cancelled", "expired")
PLAIN_LINE_EVERY_S = 5.0


def counts(batch: dict) -> tuple[int, int, int]:
    """(done, failed, total) from a batch object: done counts every item that ended, whatever how."""
    c = batch.get("request_counts") or {}
    total = int(c.get("total") or 0)
    failed = int(c.get("failed") or 0) + int(c.get("cancelled") or 0) + int(c.get("expired") or 0)
    return int(c.get("completed") or 0) + failed, failed, total


class Progress:
    def __init__(self, enabled: bool, stream: Any = None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._tqdm: Any = None
        self._last_plain = ""
        self._last_plain_at = 0.0
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            self._tqdm = tqdm

    def update(self, batch: dict) -> None:
        if not self.enabled:
            return
        done, failed, total = counts(batch)
        status = batch.get("status", "")
        label = f"batch {str(batch.get('id', ''))[:8]}"
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=total, desc=label, unit="item", file=self.stream, leave=True)
            self._bar.n = done
            self._bar.set_postfix_str(f"{status}, {failed} not ok", refresh=False)
            self._bar.refresh()
            return
        line = f"{label} {status}: {done}/{total} done, {failed} not ok"
        tty = getattr(self.stream, "isatty", lambda: False)()
        now = time.monotonic()
        if tty:
            self.stream.write("\r" + line.ljust(len(self._last_plain)))
        elif line != self._last_plain and (
            status in FINISHED or now - self._last_plain_at >= PLAIN_LINE_EVERY_S
        ):
            self.stream.write(line + "\n")
            self._last_plain_at = now
        else:
            return
        self._last_plain = line
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self._last_plain and getattr(self.stream, "isatty", lambda: False)():
            self.stream.write("\n")
            self.stream.flush()
