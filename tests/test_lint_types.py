"""mypy over the engine (CI runs `make test`, so it type-checks too; `make lint` runs the same).

Which files and how strictly: [tool.mypy] in pyproject.toml (gateway_engine/ strict, and
tests/engine/test_types_conformance.py, which proves the concrete stores, breakers and limits source
satisfy gateway_engine.protocols)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_mypy_passes_on_the_engine():
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mypy failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
