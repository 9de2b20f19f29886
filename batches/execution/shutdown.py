"""Warm shutdown of a worker: stop claiming, let the calls in flight answer (at most
GATEWAY_SHUTDOWN_SECONDS), store what answered, give the rest back at once, exit.

How a shutdown reaches a running dispatcher slice:

* **prefork child** (Celery's default pool): billiard makes SIGTERM exit a pool child at once
  (``sys.exit`` from its handler, installed after ``worker_process_init``). A slice starting in a child
  takes SIGTERM over (``_take_sigterm``): an idle child still exits at once through billiard's handler
  (nothing in flight); a child running a slice marks the shutdown and the slice winds down.
  That covers a SIGTERM to the whole process group (``make down``, systemd, tests) and one sent to a
  child alone (which then exits a moment after its slice's task returned, so its master starts a fresh
  one).
* **the worker's main process** (``worker_shutting_down``, sent by Celery's warm-shutdown handler): marks
  the shutdown here (solo and threads pools run slices in this process) and passes SIGTERM on to the
  pool children (a ``docker stop`` signals only the main process).

A slice that sees the mark: closes its feed, stops the engine (``RunControl.stop``: items not in flight
end ``released``, with their attempts so far), waits for the calls in flight up to
GATEWAY_SHUTDOWN_SECONDS, stores the answers, releases every other claim (the attempt journal counts
any call still unanswered then), and returns. ``make down`` and compose wait longer than that bound.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from django.conf import settings

from gateway_site.forksafe import after_fork

log = logging.getLogger("batches.execution")

_requested = threading.Event()
_state: dict = {"slices": 0, "pool_child": False, "previous": None}
_lock = threading.Lock()


@after_fork
def _forget() -> None:
    global _requested, _lock
    _requested, _lock = threading.Event(), threading.Lock()
    _state.update(slices=0, pool_child=False, previous=None)


def seconds() -> float:
    return float(settings.GATEWAY_SHUTDOWN_SECONDS)


def requested() -> bool:
    return _requested.is_set()


def request(why: str) -> None:
    if not _requested.is_set():
        _requested.set()
        log.warning(
            "shutdown (%s): no new claims; calls in flight finish (at most %.0f s), the rest is released",
            why,
            seconds(),
        )


class running_slice:  # noqa: N801 - a context manager read as a statement
    """Marks a slice running in this process (an idle pool child exits at once on SIGTERM)."""

    def __enter__(self) -> None:
        with _lock:
            _state["slices"] += 1
        if _state["pool_child"]:
            _take_sigterm()

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _state["slices"] -= 1
        if _requested.is_set() and _state["pool_child"] and _state["slices"] == 0:
            # this child will take no more work: exit once the task's return has reached the master
            timer = threading.Timer(1.0, os._exit, (0,))
            timer.daemon = True
            timer.start()


def _on_sigterm(signum: int, frame: object) -> None:
    if _state["slices"] == 0:  # idle: nothing in flight, exit as the pool child would have
        previous = _state["previous"]
        if callable(previous):
            previous(signum, frame)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    request("SIGTERM")


def _take_sigterm() -> None:
    """Make SIGTERM ours in this pool child. billiard installs its own exit handler after
    worker_process_init (it calls sys.exit at once), so this runs when a slice starts; the previous
    handler is kept for an idle child."""
    try:
        current = signal.getsignal(signal.SIGTERM)
        if current is not _on_sigterm:
            _state["previous"] = current
            signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (a threads pool): the main process's handler covers it
        pass


def install_child_handler() -> None:
    """In a prefork pool child (worker_process_init): slices started here take SIGTERM over."""
    _state["pool_child"] = True


def on_worker_shutting_down() -> None:
    """In the worker's main process, from Celery's warm-shutdown handler."""
    request("worker shutting down")
    try:
        from billiard.process import active_children

        children = [c.pid for c in active_children() if c.pid]
    except Exception:  # noqa: BLE001 - no pool children (solo/threads)
        children = []
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
