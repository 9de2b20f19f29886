"""The first day in production (issue #28): `make up` / `make down` verbatim from the checkout, the stop
grace that lets a worker's warm shutdown finish, the compose file's wiring (checked statically: Docker
may not run where the tests do), and the small things a new user trips over (SQLite WAL files in git,
a key file with a trailing newline).

`make up` runs against this test run's own PostgreSQL database, Redis key prefix and Celery queue (so
its workers never take another run's or a developer's tasks), on free ports, with its pid files and
logs in a directory of the test's own (UP_DIR), never a developer's var/up.

Before the fixes: `make up` died in `migrate` with FileNotFoundError (scripts/up.sh exported
PROMETHEUS_MULTIPROC_DIR before creating it), `make down` sent SIGKILL after 15 s whatever the workers'
warm-shutdown bound, and the compose file ran Redis without persistence, the image as root, gunicorn
with 3 workers and no threads, Grafana with admin/admin on every interface, and mounted a token file
that is not in the repository."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
UP_SH = ROOT / "scripts" / "up.sh"


# --- helpers -----------------------------------------------------------------------------------------


def process_groups() -> dict[int, list[int]]:
    """pgid → pids of every process on this host (from /proc)."""
    groups: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":  # a zombie holds no resources; its parent reaps it
            continue
        groups.setdefault(int(fields[2]), []).append(int(entry.name))
    return groups


def pid_files(up_dir: Path) -> dict[str, int]:
    return {f.stem: int(f.read_text().strip()) for f in sorted(up_dir.glob("*.pid"))}


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would have: none of this test process's Django, Celery, gateway
    or metrics settings (the test settings set some of them in os.environ)."""
    drop = ("DJANGO_", "CELERY_", "GATEWAY_", "PROMETHEUS_", "DATABASE_URL", "REDIS_URL", "TEST_DB_SUFFIX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


# --- make up / make down -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.django_db(transaction=True)
def test_make_up_answers_ready_runs_a_batch_and_make_down_stops_everything(tmp_path):
    from django.conf import settings

    from teams.services import create_api_key, create_team
    from tests.servers import free_port
    from tests.workers import database_url, delete_queue, test_queue

    # `make up` depends on `make venv`, which reinstalls the virtualenv when pyproject.toml is newer than
    # its stamp: never from a test (other runs share the virtualenv); `make test` brings it up to date first
    if subprocess.run(["make", "-q", "venv"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("the virtualenv is older than pyproject.toml: run `make venv` (make test does) first")
    up_dir = tmp_path / "up"
    queue = test_queue("up")
    web_port, sim_port = free_port(), free_port()
    env = clean_env(
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX,
        CELERY_TASK_DEFAULT_QUEUE=queue,  # a worker on the shared broker's default queue takes others' tasks
        UP_DIR=str(up_dir),
        WEB_PORT=str(web_port),
        SIM_PORT=str(sim_port),
        WORKERS="1",
    )
    web = f"http://127.0.0.1:{web_port}"
    up_log = tmp_path / "make-up.log"

    def logs() -> str:
        parts = [f"--- make up\n{up_log.read_text(errors='replace') if up_log.exists() else ''}"]
        for f in sorted(up_dir.glob("*.log")):
            parts.append(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    try:
        t0 = time.monotonic()
        with open(up_log, "wb") as out:
            up = subprocess.Popen(["make", "up"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        ready_after = None
        with httpx.Client(timeout=3) as client:
            while time.monotonic() - t0 < 240:
                try:
                    if client.get(f"{web}/readyz").status_code == 200:
                        ready_after = time.monotonic() - t0
                        break
                except httpx.HTTPError:
                    pass
                if up.poll() not in (None, 0):
                    break  # make up failed: nothing will answer
                time.sleep(0.2)
        code = up.wait(120)
        assert code == 0, f"make up exited {code}\n{logs()}"
        printed = up_log.read_text()  # the environment for management commands has the non-default settings
        assert f"export CELERY_TASK_DEFAULT_QUEUE='{queue}'" in printed, printed[-2000:]
        assert f"export GATEWAY_REDIS_PREFIX='{settings.GATEWAY_REDIS_PREFIX}'" in printed
        assert ready_after is not None, f"/readyz never answered 200\n{logs()}"
        print(
            f"\nmake up → /readyz 200: {ready_after:.1f} s (make up returned after {time.monotonic() - t0:.1f} s)"
        )

        ready = httpx.get(f"{web}/readyz", timeout=5).json()
        assert ready["ready"] is True, ready
        assert {name: c["status"] for name, c in ready["checks"].items()} == {
            "database": "ok", "migrations": "ok", "redis": "ok", "celery_workers": "ok", "worker_metrics": "ok",
        }, ready  # fmt: skip
        started = pid_files(up_dir)
        assert set(started) == {"sim", "web", "worker1"}, started

        # a small batch through the web server → the Redis broker → the worker → the simulator make up started
        team = create_team("upcheck")[0]
        key = create_api_key(team, "up")[1]
        body = b"".join((ROOT / "examples" / "batch.jsonl").read_bytes().splitlines(keepends=True)[:30])
        auth = {"Authorization": f"Bearer {key}"}
        resp = httpx.post(
            f"{web}/api/v1/batches",
            content=body,
            headers={**auth, "Content-Type": "application/jsonl"},
            timeout=30,
        )
        assert resp.status_code == 201, resp.text
        batch_id = resp.json()["id"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            batch = httpx.get(f"{web}/api/v1/batches/{batch_id}", headers=auth, timeout=10).json()
            if batch["status"] in ("completed", "failed", "cancelled", "expired"):
                break
            time.sleep(0.5)
        assert batch["status"] == "completed", f"{batch}\n{logs()}"
        assert batch["request_counts"]["completed"] == 30, batch

        # the interactive lane on the same port (the ASGI app): one plain call and one stream
        import openai

        client = openai.OpenAI(base_url=f"{web}/v1", api_key=key, max_retries=0, timeout=30)
        answer = client.chat.completions.create(
            model="gpt", messages=[{"role": "user", "content": "hi"}], max_tokens=8
        )
        assert answer.choices[0].message.content, answer
        chunks = list(client.chat.completions.create(model="claude", messages=[{"role": "user", "content": "hi"}],
                                                     max_tokens=8, stream=True))  # fmt: skip
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks
        assert {m.id for m in client.models.list().data} >= {"gpt", "claude", "gemini", "azure"}

        # the worker's counters reach the web process's /metrics (one multiprocess directory, created first),
        # which make up protects with the token it generated
        assert httpx.get(f"{web}/metrics", timeout=10).status_code == 403
        token = (up_dir / "metrics_token").read_text()
        assert token == token.strip() and len(token) >= 32
        metrics = httpx.get(f"{web}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10).text
        succeeded = re.search(
            r'^gateway_items_total\{lane="batch",status="succeeded"\} (\S+)$', metrics, re.M
        )
        assert succeeded and float(succeeded.group(1)) >= 30, metrics[-2000:]

        t_down = time.monotonic()
        down = subprocess.run(
            ["make", "down"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        down_seconds = time.monotonic() - t_down
        print(f"make down: {down_seconds:.1f} s\n{down.stdout}")
        assert down.returncode == 0, down.stdout + down.stderr
        assert "waiting up to 45 s" in down.stdout, down.stdout  # GATEWAY_SHUTDOWN_SECONDS (30) + 15
        assert "killing it" not in down.stdout, down.stdout + logs()  # every process went on SIGTERM
        left = {name: process_groups().get(pid) for name, pid in started.items()}
        assert not any(left.values()), f"processes left after make down: {left}"
        assert not list(up_dir.glob("*.pid"))
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{web}/healthz", timeout=2)
    finally:
        if list(up_dir.glob("*.pid")):
            subprocess.run(["bash", str(UP_SH), "stop"], cwd=ROOT, env=env, capture_output=True, timeout=120)
        delete_queue(queue)


# --- make down waits for the warm shutdown -----------------------------------------------------------


def _fake_service(up_dir: Path, name: str, script: str) -> subprocess.Popen:
    proc = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    (up_dir / f"{name}.pid").write_text(str(proc.pid))
    return proc


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_make_down_waits_shutdown_seconds_plus_15_before_sigkill(tmp_path):
    """A process that needs 16 s after SIGTERM (a worker letting its calls in flight answer) is left to
    finish — before, `make down` killed it at 15 s; one that ignores SIGTERM is killed at
    GATEWAY_SHUTDOWN_SECONDS + 15 s, not earlier."""
    up_dir = tmp_path / "up"
    up_dir.mkdir()
    finished = tmp_path / "finished"
    slow = _fake_service(
        up_dir,
        "slowworker",
        f"trap 'sleep 16; touch {shlex.quote(str(finished))}; exit 0' TERM; while :; do sleep 0.2; done",
    )
    stuck = _fake_service(up_dir, "stuck", "trap '' TERM; while :; do sleep 0.2; done")
    time.sleep(0.5)  # both have installed their traps
    try:
        t0 = time.monotonic()
        down = subprocess.run(
            ["make", "down"],
            cwd=ROOT,
            env=clean_env(UP_DIR=str(up_dir), GATEWAY_SHUTDOWN_SECONDS="3"),
            capture_output=True,
            text=True,
            timeout=90,
        )
        took = time.monotonic() - t0
        print(f"\nmake down with GATEWAY_SHUTDOWN_SECONDS=3: {took:.1f} s\n{down.stdout}")
        assert down.returncode == 0, down.stdout + down.stderr
        assert "waiting up to 18 s" in down.stdout
        assert finished.exists(), "the slow process was killed before it finished its shutdown"
        assert f"stuck (pid {stuck.pid}) did not stop in 18 s; killing it" in down.stdout
        assert "slowworker" not in down.stdout
        assert 17 <= took < 30, took
        assert slow.wait(5) == 0
        assert stuck.wait(5) == -9
        groups = process_groups()
        assert slow.pid not in groups and stuck.pid not in groups
        assert not list(up_dir.glob("*.pid"))
    finally:
        for proc in (slow, stuck):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(5)


def test_make_down_default_grace_is_45_seconds_and_refuses_a_bad_bound(tmp_path):
    up_dir = tmp_path / "up"
    up_dir.mkdir()
    proc = _fake_service(up_dir, "quick", "while :; do sleep 0.2; done")
    down = subprocess.run(
        ["make", "down"],
        cwd=ROOT,
        env=clean_env(UP_DIR=str(up_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 0, down.stderr
    assert "waiting up to 45 s" in down.stdout
    assert proc.wait(5) != 0
    bad = subprocess.run(
        ["bash", str(UP_SH), "stop"],
        cwd=ROOT,
        env=clean_env(UP_DIR=str(up_dir), GATEWAY_SHUTDOWN_SECONDS="soon"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "GATEWAY_SHUTDOWN_SECONDS=soon is not a number" in bad.stderr


def test_up_sh_env_prints_every_setting_the_stack_was_started_with(tmp_path):
    """The export lines `make up` prints for management commands (also `scripts/up.sh env`): every
    gateway, Django and Celery setting it was started with, secrets by name only."""
    env = clean_env(UP_DIR=str(tmp_path / "up"), GATEWAY_AUTH_FAILURE_LIMIT="5",
                    GATEWAY_TRUSTED_PROXIES="10.0.0.1, 10.0.0.2", DJANGO_ALLOWED_HOSTS="gw.example",
                    GATEWAY_PROVIDER_SECRET_GPT="sk-not-to-be-printed")  # fmt: skip
    out = subprocess.run(["bash", str(UP_SH), "env"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "sk-not-to-be-printed" not in out.stdout and "GATEWAY_PROVIDER_SECRET_GPT is set" in out.stdout
    script = out.stdout + "\nenv\n"  # run the printed lines: a command gets the very same values
    seen = subprocess.run(["bash", "-c", script], env=clean_env(), capture_output=True, text=True).stdout
    values = dict(line.split("=", 1) for line in seen.splitlines() if "=" in line)
    assert values["GATEWAY_AUTH_FAILURE_LIMIT"] == "5"
    assert values["GATEWAY_TRUSTED_PROXIES"] == "10.0.0.1, 10.0.0.2"
    assert values["DJANGO_ALLOWED_HOSTS"] == "gw.example"
    assert values["DJANGO_SETTINGS_MODULE"] == "gateway_site.settings.production"


def test_up_sh_creates_the_metrics_directory_before_any_python_process():
    """Static order check (the slow test above runs it): `mkdir` of PROMETHEUS_MULTIPROC_DIR comes before
    the first manage.py command, and the directory lives in UP_DIR."""
    text = UP_SH.read_text()
    created = text.index('mkdir -p "$PROMETHEUS_MULTIPROC_DIR"')
    assert created < text.index("manage.py migrate")
    assert "PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-$RUN/metrics}" in text
    assert "RUN=${UP_DIR:-$ROOT/var/up}" in text


# --- docker-compose.yml, statically ------------------------------------------------------------------


def _compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _seconds(value: str) -> float:
    total, units = 0.0, {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", value):
        total += float(number) * units[unit]
    return total


def _env_example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            values[k.strip()] = v.strip()
    return values


def test_compose_mounts_only_what_the_repository_ships():
    for name, service in _compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is not in the repository"


def test_compose_worker_waits_longer_than_the_warm_shutdown():
    services = _compose()["services"]
    bound = float(_env_example().get("GATEWAY_SHUTDOWN_SECONDS") or 30)  # settings' default
    assert _seconds(services["worker"]["stop_grace_period"]) >= bound + 15
    assert _seconds(services["web"]["stop_grace_period"]) >= 35 + 5  # gunicorn's graceful_timeout (35 s)


def test_compose_redis_persists_to_a_named_volume():
    compose = _compose()
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "--save" not in command or command[command.index("--save") + 1] != ""
    named = [v.split(":")[0] for v in redis["volumes"] if v.split(":")[1] == "/data"]
    assert named and named[0] in compose["volumes"]


def test_image_runs_as_a_non_root_user():
    dockerfile = (ROOT / "Dockerfile").read_text()
    after_last_from = dockerfile[dockerfile.rindex("\nFROM ") :]
    users = re.findall(r"^USER\s+(\S+)", after_last_from, re.M)
    assert users and users[-1] not in ("root", "0", "0:0"), users


def _server_options(args: list[str]) -> dict[str, str]:
    options = {"app": next(a for a in args if a.startswith("gateway_site."))}
    for i, arg in enumerate(args):
        if arg.startswith("-") and i + 1 < len(args):
            options[arg] = args[i + 1]
    return options


def test_web_server_matches_make_up():
    """make up, compose and the image run the same web server: gunicorn on the ASGI app with the gateway's
    uvicorn worker (gunicorn.conf.py: prometheus hooks, graceful stop, no X-Forwarded-For rewriting by the
    server), 2 workers."""
    text = UP_SH.read_text()
    line = re.search(r"launch web (.*?)--access-logfile", text, re.S).group(1)
    args = shlex.split(line.replace("\\\n", " "))
    up = _server_options(args)
    up["--workers"] = re.search(r"WEB_WORKERS=\$\{WEB_WORKERS:-(\d+)\}", text).group(1)
    want = {"server": "gunicorn", "app": "gateway_site.asgi:application", "--workers": "2"}
    assert {"server": args[2], **{k: up[k] for k in ("app", "--workers")}} == want, up
    compose = _compose()["services"]["web"]["command"]
    assert {
        "server": compose[0],
        **{k: _server_options(compose).get(k) for k in ("app", "--workers")},
    } == want
    cmd = re.search(r"^CMD (\[.*\])", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    import json

    image = json.loads(cmd)
    assert {"server": image[0], **{k: _server_options(image).get(k) for k in ("app", "--workers")}} == want
    for command in (args, compose, image):  # nothing on the command line turns uvicorn's rewriting back on
        assert not any("forwarded-allow-ips" in a or a in ("-k", "--worker-class") for a in command), command
    conf = (ROOT / "gunicorn.conf.py").read_text()  # read, not run: it configures the metrics directory
    assert re.search(r'^worker_class = .*else "gateway_site\.web_worker\.ASGIWorker"$', conf, re.M)
    graceful = int(re.search(r"^graceful_timeout = (\d+)$", conf, re.M).group(1))
    assert graceful >= 30 + 5  # uvicorn's own 30 s inside it, then the lifespan shutdown


def test_worker_keeps_the_default_prefork_pool():
    command = _compose()["services"]["worker"]["command"]
    assert command[:4] == ["celery", "-A", "gateway_site", "worker"]
    assert not any(a in ("-P", "--pool") or a.startswith("--pool=") for a in command), command


def test_grafana_and_prometheus_bind_to_localhost_and_grafana_has_no_default_password():
    services = _compose()["services"]
    for name in ("grafana", "prometheus", "web"):
        for port in services[name]["ports"]:
            # "127.0.0.1:HOST_PORT:PORT" or "${SOME_BIND:-127.0.0.1}:...": published on localhost by default
            assert re.match(r"^(127\.0\.0\.1|\$\{\w+:-127\.0\.0\.1\}):", port), (name, port)
    grafana = services["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "${GRAFANA_ADMIN_PASSWORD:-}"
    assert "admin" not in str(grafana["environment"]).replace("ADMIN", "").lower()
    script = grafana["entrypoint"][2].replace("$$", "$")
    refused = subprocess.run(
        ["sh", "-c", script], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True
    )
    assert refused.returncode == 1 and "GRAFANA_ADMIN_PASSWORD is empty" in refused.stderr


def test_prometheus_gets_the_metrics_token_web_checks(tmp_path):
    services = _compose()["services"]
    # every process on production settings (they require the token) and Prometheus get one value
    for name in ("migrate", "web", "worker", "prometheus"):
        assert services[name]["environment"]["GATEWAY_METRICS_TOKEN"] == "${GATEWAY_METRICS_TOKEN:-}", name
    prometheus = services["prometheus"]
    assert prometheus["environment"]["GATEWAY_METRICS_TOKEN"] == "${GATEWAY_METRICS_TOKEN:-}"
    yaml = pytest.importorskip("yaml")
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    job = scrape["scrape_configs"][0]
    assert job["static_configs"][0]["targets"] == ["web:8000"]
    token_file = job["authorization"]["credentials_file"]
    # run the entrypoint's shell with the token file redirected into tmp_path and prometheus echoed
    script = prometheus["entrypoint"][2].replace("$$", "$")
    script = script.replace(token_file, str(tmp_path / "token")).replace(
        "exec prometheus", "exec echo prometheus"
    )
    env = {"PATH": os.environ["PATH"]}
    refused = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "GATEWAY_METRICS_TOKEN is empty" in refused.stderr
    ran = subprocess.run(
        ["sh", "-c", script], env={**env, "GATEWAY_METRICS_TOKEN": "tok-123"}, capture_output=True, text=True
    )
    assert ran.returncode == 0 and ran.stdout.startswith(
        "prometheus --config.file=/etc/prometheus/prometheus.yml"
    )
    assert (tmp_path / "token").read_bytes() == b"tok-123"  # no newline: it is sent as the bearer token
    assert (tmp_path / "token").stat().st_mode & 0o077 == 0


def test_compose_check_and_secrets_scripts_parse():
    for script in ("compose_check.sh", "compose_secrets.sh", "up.sh", "demo.sh"):
        result = subprocess.run(
            ["bash", "-n", str(ROOT / "scripts" / script)], capture_output=True, text=True
        )
        assert result.returncode == 0, (script, result.stderr)
    check = (ROOT / "scripts" / "compose_check.sh").read_text()
    assert "--profile observability" in check and "gateway_items_total" in check


def test_compose_secrets_fills_env_once_and_prints_no_secret(tmp_path):
    env_file = tmp_path / ".env"
    run = lambda: subprocess.run(  # noqa: E731
        ["bash", str(ROOT / "scripts" / "compose_secrets.sh"), str(env_file)],
        cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    first = run()
    assert first.returncode == 0, first.stderr
    values = dict(
        line.split("=", 1) for line in env_file.read_text().splitlines() if line and not line.startswith("#")
    )
    for name in ("DJANGO_SECRET_KEY", "GATEWAY_METRICS_TOKEN", "GRAFANA_ADMIN_PASSWORD"):
        assert len(values[name]) >= 32, name
        assert values[name] not in first.stdout + first.stderr
    assert "change-me" not in values["DJANGO_SECRET_KEY"]
    assert env_file.stat().st_mode & 0o077 == 0
    second = run()
    assert second.returncode == 0 and env_file.read_text().count("GATEWAY_METRICS_TOKEN=") == 1
    again = dict(
        line.split("=", 1) for line in env_file.read_text().splitlines() if line and not line.startswith("#")
    )
    assert again == values  # idempotent: existing secrets are kept


# --- small things: git ignores SQLite's WAL files, key files end without a newline --------------------


@pytest.mark.parametrize(
    "path", ["db.sqlite3-wal", "db.sqlite3-shm", "var/demo.sqlite3-wal", "other.sqlite3-shm"]
)
def test_gitignore_covers_sqlite_wal_files(path):
    result = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
    assert result.returncode == 0, f"{path} is not ignored"


def test_demo_key_file_ends_without_a_newline(tmp_path):
    """The openai SDK sends a key read from a file as is: a trailing newline makes the header invalid and
    the SDK reports a bare "Connection error"."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from demo_client import write_key_file
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    path = tmp_path / "api_key"
    write_key_file(str(path), "bgw_abc123\n")
    assert path.read_bytes() == b"bgw_abc123"
    assert path.stat().st_mode & 0o777 == 0o600
    httpx.Headers({"Authorization": f"Bearer {path.read_text()}"})  # a valid header value
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    assert '--key-file "$LOGS/api_key"' in demo
    assert not re.search(r"printf '%s\\n' \"\$KEY\"", demo)


def test_up_sh_secret_files_end_without_a_newline():
    text = UP_SH.read_text()
    for name in ("secret_key", "metrics_token"):
        line = next(x for x in text.splitlines() if f'>"$RUN/{name}"' in x)
        assert "sys.stdout.write(" in line and "print(" not in line, line
