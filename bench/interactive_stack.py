"""The gateway's interactive lane for a benchmark (issue #22): bench.stack.GatewayStack's shared mode
(PostgreSQL + Redis, a fresh database, the providers file loaded, a team and its key) with the ASGI app
on uvicorn as users start it, and optionally gunicorn (the REST API) and Celery workers.

    with InteractiveStack(providers=file_dict, logdir=Path("var/bench/x"), uvicorn_workers=1) as gw:
        gw.asgi_url     # http://127.0.0.1:PORT, serving /v1/chat/completions (and every other path)
        gw.url          # gunicorn's REST API (with_gunicorn=True), else the same as asgi_url
        gw.uvicorn_pids()  # the processes serving requests (for py-spy)

uvicorn: ``uvicorn gateway_site.asgi:application --host 127.0.0.1 --port P`` (+ ``--workers N`` when N
> 1), in the environment GatewayStack gives every process (DJANGO_SETTINGS_MODULE=gateway_site.settings.
local with DJANGO_DEBUG=0, DATABASE_URL, REDIS_URL, a key prefix of its own); gateway_site.asgi sets
GATEWAY_ASGI=1 itself. The database and Redis: DATABASE_URL / REDIS_URL of the environment, else
bench.stack's defaults (the database is dropped and re-created).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx

from bench.common import free_port
from bench.stack import PY, GatewayStack, pool_children, recreate_postgres_db

UVICORN = str(Path(PY).parent / "uvicorn")


def uvicorn_argv(port: int, workers: int = 1, extra: list[str] | None = None) -> list[str]:
    argv = [UVICORN, "gateway_site.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    if workers > 1:
        argv += ["--workers", str(workers)]
    return argv + list(extra or [])


def uvicorn_command(workers: int = 1, extra: list[str] | None = None) -> str:
    """The uvicorn command line as a report shows it (port left symbolic)."""
    argv = ["uvicorn", "gateway_site.asgi:application", "--host", "127.0.0.1", "--port", "P"]
    if workers > 1:
        argv += ["--workers", str(workers)]
    return " ".join(argv + list(extra or []))


class InteractiveStack(GatewayStack):
    def __init__(
        self,
        providers: dict,
        logdir: Path,
        uvicorn_workers: int = 1,
        uvicorn_extra: list[str] | None = None,
        with_gunicorn: bool = False,
        workers: int = 0,
        extra_env: dict | None = None,
        **kw,
    ):
        kw.setdefault("database_url", os.environ.get("DATABASE_URL"))
        kw.setdefault("redis_url", os.environ.get("REDIS_URL"))
        super().__init__("shared", providers, logdir, workers=workers, extra_env=extra_env, **kw)
        self.uvicorn_workers = uvicorn_workers
        self.uvicorn_extra = uvicorn_extra or []
        self.with_gunicorn = with_gunicorn
        self.asgi_url = ""
        self.uvicorn_proc = None

    def __enter__(self) -> InteractiveStack:
        self.logdir.mkdir(parents=True, exist_ok=True)
        env = self.env()
        self._env = env
        if env["DATABASE_URL"].startswith("postgres"):
            recreate_postgres_db(env["DATABASE_URL"])
        try:
            self.manage("migrate", "--noinput", env=env)
            pfile = self.logdir / "providers.json"
            pfile.write_text(json.dumps(self.providers, indent=1))
            self.manage("load_providers", str(pfile), env=env)
            self.manage("create_team", "bench", env=env)
            self.key = (
                self.manage("create_api_key", "--team", "bench", "--name", "bench", env=env)
                .strip()
                .splitlines()[-1]
            )
            port = free_port()
            self.asgi_url = f"http://127.0.0.1:{port}"
            self.uvicorn_proc = self.spawn(
                "uvicorn", uvicorn_argv(port, self.uvicorn_workers, self.uvicorn_extra), env
            )
            if self.with_gunicorn:
                gport = free_port()
                self.url = f"http://127.0.0.1:{gport}"
                self.spawn(
                    "web",
                    [PY, "-m", "gunicorn", "gateway_site.wsgi:application", "-b", f"127.0.0.1:{gport}",
                     "-w", str(self.web_workers), "--threads", "4", "--timeout", "120"],
                    env,
                )  # fmt: skip
            else:
                self.url = self.asgi_url
            if self.workers:
                self.spawn_workers()
            self.wait_ready()
            self._wait_url(self.asgi_url)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_url(self, base: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.uvicorn_proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {self.uvicorn_proc.returncode}; see {self.logdir}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    if self.uvicorn_workers > 1 and len(self.uvicorn_pids()) < self.uvicorn_workers:
                        time.sleep(0.2)
                        continue
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"uvicorn did not answer within {timeout} s; see {self.logdir}")

    def uvicorn_pids(self) -> list[int]:
        """The processes that serve requests: uvicorn itself, or its worker children with --workers."""
        if self.uvicorn_proc is None:
            return []
        if self.uvicorn_workers <= 1:
            return [self.uvicorn_proc.pid]
        # the supervisor's children are the workers (plus multiprocessing's resource tracker, if any)
        kids = []
        for pid in pool_children(self.uvicorn_proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"resource_tracker" not in cmd:
                kids.append(pid)
        return kids

    @property
    def chat_url(self) -> str:
        return f"{self.asgi_url}/v1/chat/completions"


def cpu_seconds(pids: list[int]) -> float:
    """user + system CPU seconds of these processes so far (from /proc; children not included)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def add_publish_args(ap) -> None:
    """--publish JSON (render a saved run and write its section) and --marker (the section's name)."""
    ap.add_argument(
        "--publish", metavar="JSON", default=None,
        help="render a run saved by --json (or the default JSON) and write its docs section, without running; "
        "the run's own arguments are read back from the command it recorded",
    )  # fmt: skip
    ap.add_argument("--marker", default=None, help="the docs section's marker (default: the bench's own)")


def load_published(ap, path: str) -> tuple[dict, list, object]:
    """(meta, rows, the run's arguments parsed from its recorded command) of a saved run."""
    import shlex

    data = json.loads(Path(path).read_text())
    run_args = ap.parse_args(shlex.split(data["meta"]["command"])[2:])
    return data["meta"], data["rows"], run_args


def publish(text: str, args, marker: str) -> None:
    from bench.common import replace_section

    print(text)
    if not args.no_write:
        replace_section(Path(args.out), args.marker or marker, text)
        print(f"wrote {args.out}")
