"""Gunicorn settings read automatically from the working directory: the documented web server is

    gunicorn gateway_site.asgi:application --bind 0.0.0.0:8000 --workers 2

(`make up`, docker-compose.yml and the Docker image run exactly that; docs/operations.md "The web server").
Each worker is gateway_site.web_worker.ASGIWorker: uvicorn's HTTP server running the ASGI application — the
interactive lane's async views and every other path — with uvicorn's own X-Forwarded-For rewriting off
(the application believes the header only from GATEWAY_TRUSTED_PROXIES). A graceful stop (SIGTERM, or
`kill -HUP` to replace the workers) lets requests and streams in progress run `graceful_timeout` seconds
(uvicorn gives up on them 5 s earlier, then runs the application's shutdown). An explicit
`gunicorn gateway_site.wsgi:application` (the WSGI side alone, benchmarks) keeps gunicorn's sync worker;
the interactive lane then answers 503 `asgi_required`.

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

WSGI_APP = "gateway_site.wsgi:application"
wsgi_app = "gateway_site.asgi:application"  # when the command names none
worker_class = "sync" if WSGI_APP in sys.argv[1:] else "gateway_site.web_worker.ASGIWorker"
graceful_timeout = 35
# no runtime-control socket (gunicorn >= 25 opens one at ~/.gunicorn/gunicorn.ctl by default: one path
# for every master of the user, and a way to change the workers that nothing here needs)
control_socket_disable = True


def post_fork(server, worker):
    # a process that had this pid before and died without an exit hook may have left live gauges
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        metrics_dir.remove_live_gauges(directory, os.getpid())


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
