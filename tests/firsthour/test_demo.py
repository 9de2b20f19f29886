"""The demo as a log or CI sees it (stdout not a terminal): short plain lines, a working staff login,
and Ctrl-C on a kept demo ends it cleanly (exit status = the batch's, not 130)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from demo_client import Progress  # noqa: E402


def test_progress_without_a_terminal_prints_plain_lines_every_few_seconds(capsys):
    progress = Progress(interactive=False, every=3.0)
    for tick in range(20):  # one poll every 0.5 s for 10 s, the text changing each time
        progress.show(f"[#] {tick}/20  status=running", "running", now=tick * 0.5)
    progress.show("[#] 20/20  status=completed", "completed", now=10.1)  # a status change: shown at once
    progress.finish("[#] 20/20  status=completed")
    lines = capsys.readouterr().out.splitlines()
    assert "\r" not in "".join(lines)
    assert lines == [
        "[#] 0/20  status=running",
        "[#] 6/20  status=running",
        "[#] 12/20  status=running",
        "[#] 18/20  status=running",
        "[#] 20/20  status=completed",
    ]


def test_progress_on_a_terminal_redraws_one_line(capsys):
    progress = Progress(interactive=True)
    progress.show("a", "running", now=0)
    progress.show("b", "running", now=0.5)
    progress.finish("b")
    assert capsys.readouterr().out == "\ra\rb\n"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kept_demo_logs_short_lines_gives_a_working_login_and_stops_on_ctrl_c():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_"))}
    env.update(DEMO_KEEP="1", SIM_PORT="0", WEB_PORT="0")
    proc = subprocess.Popen(
        ["bash", "scripts/demo.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, like a terminal's foreground job
        # and, like a shell a terminal starts, with Ctrl-C's default disposition: a signal ignored when a
        # shell starts can never be trapped, and an earlier test of the session may leave SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if "press Ctrl-C" in line:
                break
        output = "\n".join(lines)
        assert "press Ctrl-C" in output, output[-3000:]
        assert "-> OK" in output
        login = re.search(r"login\s+user (\S+)\s+password (\S+)", output)
        admin = re.search(r"admin\s+(http://\S+/admin/)", output)
        assert login and admin, output[-2000:]
        with httpx.Client(follow_redirects=False, timeout=10) as client:
            page = client.get(admin.group(1) + "login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
            response = client.post(
                admin.group(1) + "login/",
                data={"username": login.group(1), "password": login.group(2), "csrfmiddlewaretoken": token},
                headers={"Referer": admin.group(1) + "login/"},
            )
            assert response.status_code == 302, response.text[:500]
            dashboard = client.get(admin.group(1).replace("/admin/", "/dashboard/"))
            assert dashboard.status_code == 200 and "Batch history" in dashboard.text
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        rest, _ = proc.communicate(timeout=30)
        lines.extend(rest.splitlines())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, "\n".join(lines[-20:])
    assert "\r" not in "\n".join(lines)
    assert max(len(line) for line in lines) <= 300
    assert "DEMO_KEEP=1 make demo" not in "\n".join(lines)  # no "run again with DEMO_KEEP=1" when it is set
