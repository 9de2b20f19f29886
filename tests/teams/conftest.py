"""Fixtures for the team tests: the simulator and real Celery workers (re-exported)."""

from __future__ import annotations

from sim.testing import sim_server  # noqa: F401 - fixture re-export
from tests.scheduling.conftest import workers  # noqa: F401 - fixture re-export
