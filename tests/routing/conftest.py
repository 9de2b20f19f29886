"""Fixtures of the routing tests: the simulator (a thread, free port)."""

from __future__ import annotations

from sim.testing import sim_server  # noqa: F401 - fixture re-export
