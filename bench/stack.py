"""Start the gateway for a benchmark: web server (+ Celery workers) with a fresh database.

    with GatewayStack(mode="single", providers=file_dict, logdir=Path("var/bench")) as gw:
        gw.submit(items) -> batch dict; gw.wait(batch_id) -> batch dict

mode "single": SQLite, no REDIS_URL (eager Celery, in-process quota store), `manage.py runserver`.
mode "shared": PostgreSQL + Redis, gunicorn and `workers` x `celery -A gateway_site worker`, started the
standard way: Celery's default prefork pool with its default concurrency (one child per CPU) unless
`worker_pool` (-P) / `worker_concurrency` (-c) say otherwise (e.g. worker_concurrency=1, the setting every
benchmark used before issue #19). `gw.pool_label` names what ran, for the report.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bench.common import ROOT, free_port

PY = sys.executable
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/gateway_bench"
# A Redis database of its own so benchmark workers never take tasks from other runs on db 0.
DEFAULT_REDIS = "redis://127.0.0.1:6379/7"
TERMINAL = {"completed", "failed", "cancelled"}


def recreate_postgres_db(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


class GatewayStack:
    def __init__(
        self,
        mode: str,
        providers: dict,
        logdir: Path,
        workers: int = 2,
        worker_concurrency: int | None = None,
        worker_pool: str | None = None,
        web_workers: int = 2,
        database_url: str | None = None,
        redis_url: str | None = None,
        extra_env: dict | None = None,
    ):
        assert mode in ("single", "shared")
        self.mode = mode
        self.providers = providers
        self.logdir = Path(logdir)
        self.workers = workers
        self.worker_concurrency = worker_concurrency  # None: Celery's default (-c omitted)
        self.worker_pool = worker_pool  # None: Celery's default, prefork (-P omitted)
        self.worker_procs: list[subprocess.Popen] = []
        self.worker_children: list[int] = []  # pool children per worker, counted once they are ready
        self.workers_started_at: float | None = None  # time.monotonic() of the last spawn_workers()
        self.workers_ready_at: float | None = None  # ... and of every worker's readiness heartbeat
        self.web_workers = web_workers
        self.database_url = database_url
        self.redis_url = redis_url or os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS)
        self.extra_env = extra_env or {}
        self.procs: list[subprocess.Popen] = []
        self.logs = []
        self.key = ""
        self.url = ""
        self._http: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        """One keep-alive client for the API calls: a fresh httpx.get() per poll builds a new client and
        SSL context each time (~30 ms of CPU), which the measured gateway would have to share."""
        if self._http is None:
            self._http = httpx.Client()
        return self._http

    # --- lifecycle ---------------------------------------------------------------------------------
    def env(self) -> dict:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "CELERY_", "DATABASE_URL"))
        }
        env.update(
            DJANGO_SETTINGS_MODULE="gateway_site.settings.local",
            DJANGO_DEBUG="0",
            DJANGO_LOG_LEVEL="WARNING",
            DJANGO_SECRET_KEY="bench-" + secrets.token_hex(16),
            PYTHONUNBUFFERED="1",
        )
        if self.mode == "single":
            db = self.logdir / "single.sqlite3"
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(db) + suffix).unlink(missing_ok=True)
            env["DATABASE_URL"] = self.database_url or f"sqlite:///{db}"
        else:
            env["DATABASE_URL"] = self.database_url or os.environ.get("BENCH_DATABASE_URL", DEFAULT_PG)
            env["REDIS_URL"] = self.redis_url
            env["GATEWAY_REDIS_PREFIX"] = f"bgwbench:{secrets.token_hex(4)}:"
            # a Celery queue of our own: tasks left on the shared Redis database by an earlier (killed)
            # run are never taken by these workers
            env["CELERY_TASK_DEFAULT_QUEUE"] = f"bench-{secrets.token_hex(4)}"
        env.update(self.extra_env)
        return env

    def manage(self, *args: str, env: dict) -> str:
        out = subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        if out.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def spawn(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        log = open(self.logdir / f"{name}.log", "wb")
        self.logs.append(log)
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def __enter__(self) -> GatewayStack:
        self.logdir.mkdir(parents=True, exist_ok=True)
        env = self.env()
        self._env = env
        if self.mode == "shared" and env["DATABASE_URL"].startswith("postgres"):
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
            self.url = f"http://127.0.0.1:{port}"
            if self.mode == "single":
                self.spawn("web", [PY, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], env)
            else:
                self.spawn(
                    "web",
                    [PY, "-m", "gunicorn", "gateway_site.wsgi:application", "-b", f"127.0.0.1:{port}",
                     "-w", str(self.web_workers), "--threads", "4", "--timeout", "120"],
                    env,
                )  # fmt: skip
                self.spawn_workers()
            self.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[:4]} exited with {p.returncode}; see {self.logdir}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            raise RuntimeError(f"gateway web server did not answer within {timeout} s; see {self.logdir}")
        if self.mode == "shared" and self.workers:  # the workers must be consuming before a benchmark posts
            self.wait_workers(deadline)

    # --- Celery workers ----------------------------------------------------------------------------
    def worker_argv(self, i: int) -> list[str]:
        """`celery -A gateway_site worker` as users start it; -P / -c only when asked for."""
        argv = [PY, "-m", "celery", "-A", "gateway_site", "worker", "--loglevel", "WARNING"]
        if self.worker_pool:
            argv += ["-P", self.worker_pool]
        if self.worker_concurrency is not None:
            argv += ["-c", str(self.worker_concurrency)]
        return argv + ["-n", f"bench{i}-{os.getpid()}-{secrets.token_hex(2)}@%h", "--without-gossip",
                       "--without-mingle"]  # fmt: skip

    def spawn_workers(self) -> None:
        self.workers_started_at, self.workers_ready_at = time.monotonic(), None
        for i in range(self.workers):
            self.worker_procs.append(self.spawn(f"worker{i}", self.worker_argv(i), self._env))

    def start_workers(self, timeout: float = 60) -> float:
        """Start the workers (after stop_workers) and wait until every one is ready; returns the seconds
        from the spawn to readiness."""
        self.spawn_workers()
        self.wait_workers(time.monotonic() + timeout)
        return self.workers_ready_at - self.workers_started_at

    def stop_workers(self) -> None:
        """Warm shutdown of every worker (SIGTERM to its process group, pool children included)."""
        for p in self.worker_procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.worker_procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
            if p in self.procs:
                self.procs.remove(p)
        self.worker_procs = []
        try:  # a killed worker's heartbeat must not count as ready for the next start
            import redis

            client = redis.Redis.from_url(self.redis_url)
            keys = list(client.scan_iter(match=self._env["GATEWAY_REDIS_PREFIX"] + "worker-heartbeat:*"))
            if keys:
                client.delete(*keys)
            client.close()
        except Exception:  # noqa: BLE001 - best effort
            pass

    def heartbeats(self) -> set[str]:
        """Workers that said they are ready: the readiness heartbeat each worker's main process writes to
        Redis on Celery's worker_ready signal (what /readyz's celery_workers check reads)."""
        import redis

        client = redis.Redis.from_url(self.redis_url)
        try:
            pattern = self._env["GATEWAY_REDIS_PREFIX"] + "worker-heartbeat:*"
            return {k.decode() for k in client.scan_iter(match=pattern, count=500)}
        finally:
            client.close()

    def wait_workers(self, deadline: float) -> None:
        """Until every worker is ready: its heartbeat is in Redis (or its log says "ready.", at INFO)."""
        import re

        while time.monotonic() < deadline:
            for p in self.worker_procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Celery worker exited with {p.returncode}; see {self.logdir}")
            pids = {p.pid for p in self.worker_procs}
            try:
                beating = {int(k.rsplit(":", 1)[1]) for k in self.heartbeats()} & pids
            except Exception:  # noqa: BLE001 - Redis hiccup: try again
                beating = set()
            logged = sum(
                bool(re.search(r"ready\.", (self.logdir / f"worker{i}.log").read_text(errors="replace")))
                for i in range(self.workers)
            )
            if len(beating) >= self.workers or logged >= self.workers:
                self.workers_ready_at = time.monotonic()
                self.worker_children = [len(pool_children(p.pid)) for p in self.worker_procs]
                return
            time.sleep(0.05)
        raise RuntimeError(f"the Celery workers were not ready within the timeout; see {self.logdir}")

    @property
    def pool_label(self) -> str:
        """How the workers ran, for report lines (bench.stack.pool_label)."""
        return pool_label(self.worker_pool, self.worker_concurrency, self.worker_children)

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
        for log in self.logs:
            log.close()
        self.procs, self.logs, self.worker_procs = [], [], []
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.mode == "shared" and hasattr(self, "_env"):
            try:
                import redis

                client = redis.Redis.from_url(self.redis_url)
                prefix = self._env["GATEWAY_REDIS_PREFIX"]
                keys = list(client.scan_iter(match=prefix + "*", count=1000))
                queue = self._env["CELERY_TASK_DEFAULT_QUEUE"]
                # the bench's own queue and its kombu binding (named either way by kombu versions)
                keys += [
                    k.encode()
                    for k in (queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
                ]
                if keys:
                    client.delete(*keys)
                client.close()
            except Exception:  # noqa: BLE001 - best-effort cleanup
                pass

    # --- API ---------------------------------------------------------------------------------------
    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.key}"}

    def add_team(self, name: str, weight: int = 1) -> dict:
        """Another team with an API key of its own: returns its Authorization headers."""
        self.manage("create_team", name, env=self._env)
        if weight != 1:
            code = (
                f"from teams.models import Team; Team.objects.filter(name={name!r}).update(weight={weight})"
            )
            self.manage("shell", "-c", code, env=self._env)
        out = self.manage("create_api_key", "--team", name, "--name", "bench", env=self._env)
        return {"Authorization": f"Bearer {out.strip().splitlines()[-1]}"}

    def submit(self, items: list[dict], timeout: float = 600, headers: dict | None = None) -> dict:
        r = self.http.post(
            f"{self.url}/api/v1/batches",
            json={"items": items},
            headers=headers or self.headers,
            timeout=timeout,
        )
        if r.status_code != 201:
            raise RuntimeError(f"submit: HTTP {r.status_code}: {r.text[:500]}")
        return r.json()

    def get(self, batch_id: str, headers: dict | None = None) -> dict:
        return self.http.get(
            f"{self.url}/api/v1/batches/{batch_id}", headers=headers or self.headers, timeout=30
        ).json()

    def newest(self) -> dict | None:
        data = self.http.get(
            f"{self.url}/api/v1/batches", params={"limit": 1}, headers=self.headers, timeout=30
        ).json()
        results = data.get("results") or []
        return results[0] if results else None

    def run_batch(
        self, items: list[dict], timeout: float = 900, poll: float = 0.1, stall_timeout: float = 120
    ) -> tuple[dict, float]:
        """Submit and wait for a terminal status; returns (batch, wall seconds from POST to terminal).

        Raises TimeoutError after ``timeout`` s, or when no item finished for ``stall_timeout`` s.
        """
        box: dict = {}

        def post():
            try:
                box["batch"] = self.submit(items, timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                box["error"] = exc

        t0 = time.monotonic()
        sender = threading.Thread(target=post, daemon=True)
        sender.start()
        deadline = t0 + timeout
        batch_id = None
        progress, progress_at = -1, time.monotonic()
        while time.monotonic() < deadline:
            if "error" in box:
                raise box["error"]
            if batch_id is None and "batch" in box:
                batch_id = box["batch"]["id"]
            if batch_id:
                try:
                    batch = self.get(batch_id)
                except httpx.HTTPError:
                    batch = {}
                if batch.get("status") in TERMINAL:
                    wall = time.monotonic() - t0
                    sender.join(timeout)
                    return batch, wall
                counts = batch.get("request_counts") or {}
                done = (counts.get("completed") or 0) + (counts.get("failed") or 0)
                if done != progress:
                    progress, progress_at = done, time.monotonic()
                elif time.monotonic() - progress_at > stall_timeout:
                    raise TimeoutError(
                        f"no progress for {stall_timeout:.0f} s at {done}/{len(items)} items "
                        f"(status {batch.get('status')}); see {self.logdir}"
                    )
            time.sleep(poll)
        raise TimeoutError(f"batch did not finish within {timeout} s")

    def run_batches(
        self, submissions: list[tuple[dict, list[dict]]], timeout: float = 900, poll: float = 0.1
    ) -> tuple[list[dict], float]:
        """Several teams' batches at once: each (headers, items) POSTed on its own thread at the same
        moment; returns (the batches, wall seconds from the POSTs to the last one terminal)."""
        boxes: list[dict] = [{} for _ in submissions]
        go = threading.Event()

        def post(box: dict, headers: dict, items: list[dict]) -> None:
            go.wait()
            try:
                box["batch"] = self.submit(items, timeout=timeout, headers=headers)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                box["error"] = exc

        senders = [
            threading.Thread(target=post, args=(box, h, its), daemon=True)
            for box, (h, its) in zip(boxes, submissions, strict=True)
        ]
        for t in senders:
            t.start()
        t0 = time.monotonic()
        go.set()
        done: dict[int, dict] = {}
        try:
            while time.monotonic() < t0 + timeout:
                for i, box in enumerate(boxes):
                    if "error" in box:
                        raise box["error"]
                    if i in done or "batch" not in box:
                        continue
                    try:
                        batch = self.get(box["batch"]["id"], headers=submissions[i][0])
                    except httpx.HTTPError:
                        batch = {}
                    if batch.get("status") in TERMINAL:
                        done[i] = batch
                if len(done) == len(boxes):
                    return [done[i] for i in range(len(boxes))], time.monotonic() - t0
                time.sleep(poll)
        finally:
            for t in senders:
                t.join(1)
        raise TimeoutError(f"batches did not finish within {timeout} s")

    def results(self, batch_id: str) -> list[dict]:
        r = self.http.get(
            f"{self.url}/api/v1/batches/{batch_id}/results",
            params={"format": "jsonl"},
            headers=self.headers,
            timeout=120,
        )
        r.raise_for_status()
        return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM (e.g. from `timeout`) into SystemExit so context managers stop what they started."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def pool_children(pid: int) -> list[int]:
    """The pids of a process's direct children (a prefork worker's pool children), from /proc."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            kids.append(int(entry.name))
    return sorted(kids)


def pool_label(pool: str | None, concurrency: int | None, children: list[int] | None = None) -> str:
    """'prefork pool, Celery's default concurrency (2 children per worker)', 'prefork pool, -c 1 (1 child
    per worker)', 'solo pool', … (children: the pool children counted per worker, if known)."""
    pool = pool or "prefork"
    if pool == "solo":
        return "solo pool"
    how = "Celery's default concurrency" if concurrency is None else f"-c {concurrency}"
    seen = sorted(set(children or []))
    if pool == "prefork" and seen:
        how += f" ({'/'.join(map(str, seen))} child{'' if seen == [1] else 'ren'} per worker)"
    elif pool == "prefork" and concurrency is None:
        how += f" (one child per CPU: {os.cpu_count()})"
    return f"{pool} pool, {how}"


def add_worker_args(ap) -> None:
    """--worker-pool / --worker-concurrency for every bench that starts Celery workers (default: neither
    flag passed to celery: its default prefork pool, one child per CPU)."""
    ap.add_argument(
        "--worker-concurrency", type=int, default=None,
        help="pool children per Celery worker (celery -c); default: Celery's own (one per CPU); "
        "1 = the setting of the figures before issue #19",
    )  # fmt: skip
    ap.add_argument(
        "--worker-pool",
        default=None,
        help="Celery pool (celery -P: prefork, solo, threads); default: prefork",
    )
