import os
import shutil

from sim.testing import sim_server  # noqa: F401 - fixture


def pytest_sessionfinish(session, exitstatus):
    """This run's default metrics directory (observability/metrics_dir.py, derived from the run's own
    Redis key prefix, so no other run shares it) goes with the run: the pytest process and every worker
    the run started wrote there. Only a test prefix's directory, only the derived one. (Called for the
    whole session whenever this directory's tests were collected, e.g. by `make test`.)"""
    from django.conf import settings

    from observability import metrics_dir

    if not settings.configured:
        return
    directory = getattr(settings, "GATEWAY_METRICS_DIR", "")
    if (
        getattr(settings, "GATEWAY_METRICS_DIR_SOURCE", "") == "default"
        and settings.GATEWAY_REDIS_PREFIX.startswith("bgwtest:")
        and directory == metrics_dir.default_path(os.environ)
    ):
        shutil.rmtree(directory, ignore_errors=True)
