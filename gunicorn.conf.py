"""Gunicorn settings read automatically from the working directory (make up, the Docker image).

Prometheus multiprocess mode: a web worker that exits leaves its counter files (totals stay monotonic);
its live gauges are dropped here."""

import os


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
