"""The bridge between a synchronous caller (a dispatcher slice on a Celery task or a thread) and the
async engine.

``EngineThread`` runs ``CrossProviderBatcher.abatch`` on its own event loop in a helper thread; the
calling thread receives each finished item (``collect``), stores it, and only then lets the engine
release the item's in-flight slot (``resolve``) — "sent but not recorded" never exceeds the cap. The
dispatcher (batches.execution.dispatcher) feeds it a streaming source (``ItemFeed``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterable, Iterable
from typing import Any

from gateway_engine import CrossProviderBatcher, ItemResult, RunControl

from .common import log
from .results import WRITE_BATCH_ROWS

WRITE_GATHER_SECONDS = 0.01  # group commit: gather results for up to 10 ms per write

Entry = tuple[int, ItemResult, asyncio.Future]


def _resolve(fut: asyncio.Future, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


class EngineThread:
    """One engine run on a helper thread; finished items arrive in this thread via ``collect``."""

    def __init__(
        self,
        batcher: CrossProviderBatcher,
        items: Iterable[Any] | AsyncIterable[Any],
        *,
        name: str,
        control: RunControl | None = None,
    ):
        self.batcher = batcher
        self.items = items
        self.control = control
        self.cancel = threading.Event()
        self.inbox: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.finished = False
        self.thread = threading.Thread(target=self._target, name=name, daemon=True)

    def start(self) -> EngineThread:
        self.thread.start()
        return self

    async def _on_result(self, index: int, result: ItemResult) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.inbox.put((index, result, fut))
        await fut  # the in-flight slot stays held until the result is stored

    async def _main(self) -> None:
        batcher = self.batcher
        try:
            await batcher.abatch(
                self.items,
                on_result=self._on_result,
                should_cancel=self.cancel.is_set,
                control=self.control,
            )
        finally:
            for closeable in (batcher.store, batcher.breaker):
                try:
                    await closeable.aclose()
                except Exception:  # noqa: BLE001
                    log.warning("closing %r failed", closeable, exc_info=True)

    def _target(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # re-raised in the calling thread by join()
            self.error = exc
        finally:
            self.inbox.put(None)

    def collect(self, timeout: float = 0.2) -> list[Entry]:
        """Finished items: wait up to ``timeout`` for the first, then gather what finishes within a few
        ms (group commit), at most WRITE_BATCH_ROWS. Sets ``finished`` when the run has ended."""
        entries: list = []
        try:
            entries.append(self.inbox.get(timeout=timeout))
            gather_until = time.monotonic() + WRITE_GATHER_SECONDS
            while entries[-1] is not None and len(entries) < WRITE_BATCH_ROWS:
                wait = gather_until - time.monotonic()
                entries.append(self.inbox.get(timeout=wait) if wait > 0 else self.inbox.get_nowait())
        except queue.Empty:
            pass
        if None in entries:
            self.finished = True
            entries = [e for e in entries if e is not None]
        return entries

    @staticmethod
    def resolve(entries: list[Entry], error: BaseException | None = None) -> None:
        """Let the engine go on with these items (release their in-flight slots)."""
        for _, _, fut in entries:
            try:
                fut.get_loop().call_soon_threadsafe(_resolve, fut, error)
            except RuntimeError:  # the engine loop is gone
                pass

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error
