"""Fixtures of the routing tests: the simulator (a thread, free port), real Celery workers."""

from __future__ import annotations

from sim.testing import sim_server  # noqa: F401 - fixture re-export
from tests.scheduling.conftest import workers  # noqa: F401 - fixture re-export
