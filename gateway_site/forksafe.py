"""Per-process state that must not cross a fork.

Celery's default (prefork) pool imports the app in the master and then forks its children, so
anything a module builds at import time, or the master builds before forking, is inherited by
every child: one identity, one socket, one thread that does not exist in the child. The rule
(docs/engine.md, "Processes and fork"):

* build per-process state lazily, on first use, never at import time;
* whatever holds a socket, a thread, a lock owned by another thread, or an identity registers a reset
  here with ``after_fork(fn)``: ``fn`` runs in the child right after ``os.fork()`` (before any task)
  and forgets the parent's object, so the child builds its own on first use;
* where an identity is read, it is also checked against ``os.getpid()`` (``ProcessLocal``), so a
  fork that bypasses ``os.register_at_fork`` (none known, but cheap to guard) still gets a new one.

What is already fork-safe without a reset: redis-py's sync pools (they check the pid), the
``random`` module (CPython reseeds it after fork), ``uuid.uuid4`` (os.urandom), logging's locks
(reinitialised by CPython), prometheus_client's multiprocess values (keyed by pid).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_resets: list[Callable[[], None]] = []


def after_fork(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` in every child process right after a fork (usable as a decorator)."""
    _resets.append(fn)
    return fn


def _run_resets() -> None:
    for fn in _resets:
        try:
            fn()
        except Exception:  # noqa: BLE001 - a failing reset must not kill the new child
            import logging

            logging.getLogger(__name__).exception("after-fork reset %r failed", fn)


os.register_at_fork(after_in_child=_run_resets)


class ProcessLocal(Generic[T]):
    """A value built once per process: ``get()`` rebuilds it when called in a process (pid) other
    than the one that built it. Thread-safe."""

    def __init__(self, build: Callable[[], T]):
        self._build = build
        self._pid: int | None = None
        self._value: T | None = None
        self._lock = threading.Lock()
        after_fork(self.forget)

    def get(self) -> T:
        pid = os.getpid()
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:
                    self._value = self._build()
                    self._pid = pid
        assert self._value is not None
        return self._value

    def forget(self) -> None:
        self._lock = threading.Lock()  # the parent's lock may have been held by a thread we lack
        self._pid, self._value = None, None
