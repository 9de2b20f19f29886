"""examples/client.py runs against the real stack (tests/client/conftest.py) and exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT, sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_example_runs(stack, sim_server, make_provider, make_route, key):
    _, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "client.py"), "--url", stack.url, "--key", key(),
         "--limit", "6", "--route", "chat"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[:6]] == [
        "u1-intent", "u1-sentiment", "u1-summary", "u2-intent", "u2-sentiment", "u2-summary",
    ]  # fmt: skip
    assert "6/6 items succeeded" in lines and any(line.startswith("chat: [gpt]") for line in lines)
    assert sum(line.startswith("runnable: [gpt]") for line in lines) == 3
