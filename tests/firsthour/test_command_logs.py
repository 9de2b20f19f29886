"""How management commands log (issue #28): human-readable lines when stderr is a terminal, JSON when
asked (GATEWAY_LOG_FORMAT=json) or when stderr is not a terminal (a file, a pipe, a log collector); web
and worker processes keep JSON. The plain-HTTP warning of the production settings is logged once when a
web process starts (gateway_site/wsgi.py), not by every command that loads those settings.

Before the fix every command logged JSON on a terminal too (submit_batch --wait's progress filled with
JSON lines, the batch report as JSON inside a JSON string), and `manage.py migrate`/`check` etc. under
the production settings printed the DJANGO_SECURE_SSL_REDIRECT warning every time."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from observability.logs import ConsoleFormatter

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import logging; "
    "logging.getLogger('gateway.probe').warning('hello %s', 'there', extra={'event': 'probe', 'n': 3})"
)
SSL_WARNING = "DJANGO_SECURE_SSL_REDIRECT is off"
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "gateway_site.settings.production",
    "DJANGO_SECRET_KEY": "Zq8v3Lr0xKp2WmYt5NbJ7cHs9DgEaFu1-_4Qo6Ri",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "GATEWAY_METRICS_TOKEN": "Hn4c-Wq9Tz2Lp7Rv5Xk8Bs3Dy6Fm1Jg",
    "GATEWAY_SECRET_KEYS": "tQ4yJ1mZ0n8kQ3xv9wS6bC2dF5gH7jK1lM3nP5qR7sU=",
    "GATEWAY_METRICS_DIR": "off",
}


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's shell: none of this test run's settings, a SQLite file of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "REDIS_URL", "DATABASE_URL", "CELERY_", "GATEWAY_", "PROMETHEUS_"))
    }
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'logs.sqlite3'}", **extra)
    return env


def run_on_terminal(args: list[str], env: dict[str, str], timeout: float = 60) -> str:
    """ARGS with stderr (and stdout) on a pseudo-terminal; what the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    shown = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO once the child's side is closed
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout)
    reader.join(10)
    os.close(master)
    # colours (e.g. of `shell`'s own output on the same terminal) are not part of the log lines
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode(errors="replace").replace("\r\n", "\n"))
    assert code == 0, text
    return text


def run_piped(args: list[str], env: dict[str, str], timeout: float = 60) -> str:
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


def probe_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "gateway.probe" in line]


def shell_probe() -> list[str]:
    return [sys.executable, "manage.py", "shell", "-c", PROBE]


def test_a_command_on_a_terminal_logs_readable_lines(tmp_path):
    lines = probe_lines(run_on_terminal(shell_probe(), user_env(tmp_path)))
    assert len(lines) == 1, lines
    assert lines[0].split(" ", 1)[1] == "WARNING gateway.probe hello there event=probe n=3"


def test_a_command_whose_stderr_is_not_a_terminal_logs_json(tmp_path):
    (line,) = probe_lines(run_piped(shell_probe(), user_env(tmp_path)))
    record = json.loads(line)
    assert (record["level"], record["message"], record["event"], record["n"]) == (
        "WARNING",
        "hello there",
        "probe",
        3,
    )


@pytest.mark.parametrize(("fmt", "on_terminal"), [("json", True), ("console", False)])
def test_gateway_log_format_wins_over_the_terminal_check(tmp_path, fmt, on_terminal):
    env = user_env(tmp_path, GATEWAY_LOG_FORMAT=fmt)
    text = run_on_terminal(shell_probe(), env) if on_terminal else run_piped(shell_probe(), env)
    (line,) = probe_lines(text)
    if fmt == "json":
        assert json.loads(line)["message"] == "hello there"
    else:
        assert line.endswith("WARNING gateway.probe hello there event=probe n=3")


def test_web_and_worker_processes_keep_json_on_a_terminal(tmp_path):
    """Only manage.py switches on a terminal: a process that loads the settings otherwise (gunicorn's
    wsgi import, Celery) logs JSON unless GATEWAY_LOG_FORMAT says otherwise."""
    code = (
        "import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'gateway_site.settings.local'); "
        f"import django; django.setup(); {PROBE}"
    )
    (line,) = probe_lines(run_on_terminal([sys.executable, "-c", code], user_env(tmp_path)))
    assert json.loads(line)["event"] == "probe"


def test_commands_under_production_settings_do_not_repeat_the_plain_http_warning(tmp_path):
    env = user_env(tmp_path, **PRODUCTION)
    stderr = run_piped([sys.executable, "manage.py", "check"], env)
    assert SSL_WARNING not in stderr


def test_the_web_app_warns_about_plain_http_once_at_start(tmp_path):
    web = [sys.executable, "-c", "import gateway_site.wsgi"]
    stderr = run_piped(web, user_env(tmp_path, **PRODUCTION))
    assert stderr.count(SSL_WARNING) == 1, stderr
    assert SSL_WARNING not in run_piped(
        web, user_env(tmp_path, **PRODUCTION, DJANGO_SECURE_SSL_REDIRECT="on")
    )


def _record(name: str, msg: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord(name, logging.INFO, __file__, 1, msg, (), None)
    record.__dict__.update(extra)
    return record


def test_console_shows_the_batch_report_line_as_a_summary():
    report = json.dumps({"batch_id": "b1", "event": "batch_finished", "providers": {"a": {"x": 1}}})
    record = _record("batches.batchlog", report, event="batch_finished", batch_id="b1", status="completed")
    line = ConsoleFormatter().format(record)
    assert line.split(" ", 1)[1] == (
        "INFO batches.batchlog batch finished event=batch_finished batch_id=b1 status=completed"
    )
    assert record.getMessage() == report  # other handlers (JSON) still get the report


def test_console_leaves_out_celerys_copy_of_its_own_message():
    record = _record("celery.app.trace", "Task t[1] succeeded in 0.1s: True", data={"id": "1"})
    assert ConsoleFormatter().format(record).endswith("Task t[1] succeeded in 0.1s: True")
