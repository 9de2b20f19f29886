"""Gunicorn settings read automatically from the working directory (make up, the Docker image, a plain
`gunicorn gateway_site.wsgi:application` from the repository root).

Prometheus multiprocess mode: the master decides the multiprocess directory the same way the settings do
(observability/metrics_dir.py: PROMETHEUS_MULTIPROC_DIR, else the per-host default of this REDIS_URL and
GATEWAY_REDIS_PREFIX) — it never loads the Django settings itself, and its child_exit hook needs the
directory. A web worker that exits leaves its counter files (totals stay monotonic); its live gauges are
dropped here. The directory is never wiped here: the host's Celery workers write to it too."""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

from observability import metrics_dir  # noqa: E402

metrics_dir.configure()


def post_fork(server, worker):
    # a process that had this pid before and died without an exit hook may have left live gauges
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        metrics_dir.remove_live_gauges(directory, os.getpid())


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
